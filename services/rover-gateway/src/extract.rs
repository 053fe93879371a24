//! Request extractors every route uses, whose rejections are [`ApiError`]s, so a malformed request
//! gets the same JSON error body as every other failure: [`Body`] (JSON bodies), [`Params`] (query
//! strings), [`PathId`] (an id in the path) and [`Campus`] (the [`CAMPUS_HEADER`] header).

use std::error::Error as _;
use std::str::FromStr;

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use rover_contracts::ErrorCode;
use rover_contracts::ids::CampusId;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::input;
use crate::state::AppState;

/// The header a school-wide user names a campus with, to act within it. A campus-tied user is
/// always in their own campus: naming another is refused.
pub(crate) const CAMPUS_HEADER: &str = "x-rover-campus";

/// A JSON request body of type `T`. Unknown fields are refused wherever `T` denies them (every
/// contract argument type does), exactly as the tool server refuses them.
///
/// Rejections: a body that is not JSON, or not `Content-Type: application/json`, is
/// `invalid_request` (400); JSON that does not fit `T` (a missing or unknown field, a wrong type,
/// a malformed id) is `invalid_arguments` (400); a body over the size limit is `too_large` (413);
/// a body nested deeper than `http.max_json_depth` is `invalid_request` (400).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Body<T>(pub T);

impl<T> FromRequest<AppState> for Body<T>
where
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, ApiError> {
        input::require_json(request.headers())?;
        let bytes = input::body_bytes(Bytes::from_request(request, state).await)?;
        input::parse_json(&bytes, state.settings.http.max_json_depth).map(Body)
    }
}

/// Query-string parameters of type `T` (`?query=…&classId=…`). Parameters that do not fit `T` (a
/// missing required one, an unknown one, a malformed id) are `invalid_arguments` (400).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Params<T>(pub T);

impl<T, S> FromRequestParts<S> for Params<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(Params(value)),
            Err(rejection) => Err(query_error(&rejection)),
        }
    }
}

fn query_error(rejection: &QueryRejection) -> ApiError {
    let cause = rejection
        .source()
        .map_or_else(|| rejection.body_text(), std::string::ToString::to_string);
    ApiError::new(
        ErrorCode::InvalidArguments,
        format!("The query parameters do not fit this endpoint: {cause}."),
    )
}

/// The one path parameter of a route (`/api/departments/{id}`), parsed as `T` (a typed id).
/// Something that is not an id is `invalid_request` (400).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PathId<T>(pub T);

impl<T, S> FromRequestParts<S> for PathId<T>
where
    T: FromStr<Err: std::fmt::Display> + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|rejection: PathRejection| {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    format!("The path is not valid: {}.", rejection.body_text()),
                )
            })?;
        raw.parse().map(PathId).map_err(|error| {
            ApiError::new(
                ErrorCode::InvalidRequest,
                format!("The path is not valid: {error}."),
            )
        })
    }
}

/// The campus named by the `X-Rover-Campus` header, if any. A value that is not a campus id is
/// `invalid_request` (400); whether the caller may use that campus is decided with live rows when
/// their scope is minted.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Campus(pub Option<CampusId>);

impl<S> FromRequestParts<S> for Campus
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get(CAMPUS_HEADER) else {
            return Ok(Campus(None));
        };
        value
            .to_str()
            .ok()
            .and_then(|text| CampusId::parse(text.trim()).ok())
            .map(|campus| Campus(Some(campus)))
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    "The X-Rover-Campus header must hold a campus id (a UUID).",
                )
            })
    }
}
