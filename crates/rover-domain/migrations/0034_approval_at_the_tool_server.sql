-- Approval is decided where every entry point passes: the tool server's `execute()`. A write whose
-- policy needs approval runs only with an approved row bound to the very turn running it (or, over
-- MCP, an approval signed into the call's identity). This index finds that row in the call's
-- opening query.
CREATE INDEX approvals_consumed_idx ON approvals (school_id, consumer_turn_id, call_id)
    WHERE state = 'approved';
