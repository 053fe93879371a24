//! Reading JSON request bodies defensively: the content type, the nesting depth (checked on the raw
//! bytes before any parsing, so a deeply nested body costs one linear scan and no recursion), and a
//! parse whose errors become the one JSON error shape.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode, header};
use rover_contracts::ErrorCode;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// Whether `bytes`, read as JSON, nests arrays and objects deeper than `max` anywhere. Brackets
/// inside strings do not count; malformed JSON is left for the parser to report.
pub(crate) fn too_deep(bytes: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in bytes {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Refuses a body not sent as `Content-Type: application/json` (with or without parameters).
pub(crate) fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .is_some_and(|mime| {
            mime == "application/json"
                || (mime.starts_with("application/") && mime.ends_with("+json"))
        });
    if json {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "The request body must be JSON, sent with `Content-Type: application/json`.",
        ))
    }
}

/// The body's bytes, or `too_large` (413) beyond the body limit.
pub(crate) fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                ErrorCode::TooLarge,
                "The request body is larger than this server accepts.",
            )
        } else {
            ApiError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "The request body could not be read: {}.",
                    rejection.body_text()
                ),
            )
        }
    })
}

/// Parses a JSON body as `T` after the depth check. Not JSON is `invalid_request`; JSON that does
/// not fit `T` (a missing or unknown field, a wrong type) is `invalid_arguments`; too deep is
/// `invalid_request`. Never panics, whatever the bytes.
pub(crate) fn parse_json<T: DeserializeOwned>(
    bytes: &[u8],
    max_depth: usize,
) -> Result<T, ApiError> {
    if too_deep(bytes, max_depth) {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            format!("The request body nests deeper than {max_depth} levels."),
        ));
    }
    serde_json::from_slice(bytes).map_err(|error| {
        use serde_json::error::Category;
        match error.classify() {
            Category::Data => ApiError::new(
                ErrorCode::InvalidArguments,
                format!("The request body does not fit this endpoint: {error}."),
            ),
            Category::Syntax | Category::Eof | Category::Io => ApiError::new(
                ErrorCode::InvalidRequest,
                format!("The request body is not valid JSON: {error}."),
            ),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_nesting_outside_strings_only() {
        assert!(!too_deep(br#"{"a":[1,{"b":[]}]}"#, 4));
        assert!(too_deep(br#"{"a":[1,{"b":[]}]}"#, 3));
        assert!(!too_deep(br#"{"a":"[[[[[[[[[[{{{{{{"}"#, 1));
        assert!(!too_deep(br#"{"a":"\"[[[[[[[[["}"#, 1));
        assert!(too_deep(&[b'['; 33], 32));
        assert!(!too_deep(&[b'['; 32], 32));
        assert!(!too_deep(b"", 0));
    }

    #[test]
    fn a_deep_body_is_refused_before_parsing() {
        let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
        let error = parse_json::<serde_json::Value>(deep.as_bytes(), 32).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidRequest);
        assert!(
            error.message.contains("deeper than 32"),
            "{}",
            error.message
        );
        assert!(parse_json::<serde_json::Value>(b"[[[1]]]", 32).is_ok());
    }
}
