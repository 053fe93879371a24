-- Edit before approve. A staff member may change a proposed write's input as they approve it:
-- the approval then binds to the edited input (`input`, which the tool server's `execute()`
-- matches with `jsonb` equality, unchanged), and `edited_from` keeps what the model proposed —
-- the call the worker's gate finds the row by, and the record of what the staff member changed.
-- `NULL` when the write ran as proposed.
ALTER TABLE approvals ADD COLUMN edited_from jsonb;
