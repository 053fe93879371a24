//! Rover's school domain and its Postgres store.
//!
//! - [`provision`]: the database, its owner role and the application role; [`MIGRATOR`] embeds the
//!   schema (`migrations/`), where every tenant table has row-level security enabled and forced;
//! - [`seed`]: the demo schools every doc, demo and test relies on;
//! - [`begin_tenant`] and [`TenantTx`]: a transaction pinned to one school; [`call`]: a tool
//!   call's transaction, opened with everything it reads first in one round trip, on a
//!   connection from a [`pool::CallPool`];
//! - one function per use case, the same ones the tool server and the REST API call:
//!   [`list_departments`], [`create_department`], [`rename_department`], [`list_classes`],
//!   [`find_students`], [`enrollment_summary`], [`list_staff`], [`class_roster`],
//!   [`record_attendance`], [`list_my_classes`], [`record_marks`], [`class_marks`],
//!   [`list_teaching_assignments`], [`assign_subject_teacher`], [`results_summary`];
//! - [`resolve`]: a class, student, subject, teacher, department or term named as staff say it
//!   (or by id) becomes one row in scope, or a question — the tools take names through it;
//! - [`text`]: the one check of free text staff type — names, chat titles, feedback comments;
//! - store helpers for the services: [`audit`], [`inbox`], [`policy`], [`actor`], [`calendar()`];
//! - [`shard_keys`]: the catalog check that every table can be distributed by school.
//!
//! A turn's own storage (threads, history, journal, events, open turns, approvals, token usage)
//! lives in `rover-turnstore`; its tables are in the one schema migrated here.
//!
//! Every domain function has the shape `(tx, actor, scope, args) -> Result<Output, DomainError>`,
//! taking the contracts' argument type and returning its output type; writes return
//! [`Written`]`<Output>`, which adds the [`AuditChange`] to record with [`audit::record`] in the
//! same transaction.
//!
//! *Architecture Invariant*: tenant isolation lives in the database. Domain code runs only inside a
//! [`TenantTx`], as a role that row-level security binds; a query that forgot its school filter
//! still sees one school. Campus scope (`RunMode::Campus`) is the domain code's job: it filters
//! every read and pins every write to the campus.
//!
//! *Architecture Invariant*: relationship-posture functions ([`class_roster`],
//! [`record_attendance`], [`list_my_classes`], [`record_marks`], [`class_marks`]) assert the
//! actor's ownership themselves; policy-posture functions trust that the caller ran the casbin gate.
//!
//! *API Boundary*: this crate knows nothing of HTTP or AMQP.

pub mod actor;
mod attendance;
pub mod audit;
pub mod calendar;
pub mod call;
mod classes;
pub mod context;
mod departments;
mod error;
pub mod inbox;
mod lookup;
mod marks;
pub mod policy;
pub mod pool;
pub mod provision;
pub mod resolve;
pub mod seed;
pub mod shard_keys;
mod staff;
mod students;
mod teaching;
mod tenant;
#[cfg(feature = "test-support")]
pub mod testing;
pub mod text;

pub use attendance::record_attendance;
pub use audit::{AuditChange, Written};
pub use calendar::calendar;
pub use classes::{class_roster, list_classes, list_classes_in_one_trip};
pub use departments::{
    create_department, list_departments, list_departments_in_one_trip, rename_department,
};
pub use error::DomainError;
pub use marks::{class_marks, record_marks, results_summary};
pub use provision::MIGRATOR;
pub use seed::{DemoIds, seed_demo};
pub use staff::{list_staff, list_staff_in_one_trip};
pub use students::{enrollment_summary, find_students, find_students_in_one_trip};
pub use teaching::{assign_subject_teacher, list_my_classes, list_teaching_assignments};
pub use tenant::{Actor, TenantTx, begin_tenant, school_exists};

/// The pool of a service whose every database use starts with [`call::begin_call`] (the tool
/// server): a [`pool::CallPool`], which neither checks a connection before handing it out nor as
/// it comes back — a round trip each — because `begin_call` is the connection's first use and
/// replaces a dead one itself, and a [`TenantTx`] gives it back only after its transaction ended.
pub fn call_pool(
    settings: &rover_settings::DatabaseSettings,
) -> Result<pool::CallPool, sqlx::Error> {
    pool::CallPool::new(settings)
}

/// The application pool a service uses: connected as the application role, lazily (a service
/// starts while the database is still coming up; readiness reports it), with bounded waits.
pub fn app_pool(settings: &rover_settings::DatabaseSettings) -> Result<sqlx::PgPool, sqlx::Error> {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(settings.max_connections)
        .acquire_timeout(std::time::Duration::from_millis(
            settings.acquire_timeout_ms,
        ))
        .connect_lazy(settings.url.expose())
}
