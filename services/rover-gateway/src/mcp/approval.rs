//! Approval over MCP. The tool server decides whether a write needs approval (`approval_required`,
//! nothing written); this module only asks the staff member and carries their answer back.
//!
//! A client on MCP 2026-07-28 that can elicit gets the protocol's own round trip: the `tools/call`
//! answers `input_required` with an `elicitation/create` form (what will run, exactly, and one
//! `approve` box) and a `requestState`; the client asks its user and calls again with the answer
//! and the state echoed. The state is a token this gateway signed (HS256 under a secret derived
//! from the turn-identity key, so any replica can read it), bound to the staff member, the tool
//! and the exact arguments, and expiring after [`QUESTION_TTL_SECS`]: a client cannot alter what
//! was approved, replay it for another call or another user, or answer late. An approval becomes
//! the call's signed identity ([`rover_contracts::identity::ApprovedCall`]) for that one call id
//! and input, which is what the tool server checks. Other clients get an `isError` result saying
//! approval is needed and where to give it.

use chrono::Utc;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rmcp::model::{
    ElicitResult, ElicitationAction, ErrorData, InputRequiredResult, InputResponses,
};
use rover_contracts::identity::TurnSigner;
use rover_contracts::ids::{TurnId, UserId};
use rover_contracts::tools::ToolContract;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// How long an approval question stays answerable, in seconds.
pub(crate) const QUESTION_TTL_SECS: i64 = 600;

/// The key of the one input request Rover makes.
const REQUEST_KEY: &str = "approval";
/// The audience of a question's state: never a turn identity, never a bearer token.
const AUDIENCE: &str = "rover-mcp-approval";

/// What a question's state binds.
#[derive(Debug, Serialize, Deserialize)]
struct Question {
    aud: String,
    sub: String,
    exp: i64,
    /// The turn the call runs in (so every round is the same call id: it runs at most once).
    turn: TurnId,
    tool: String,
    input: Value,
}

/// The staff member's answer to a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Run the call, in this turn.
    Approved(TurnId),
    /// Do not run it.
    Declined,
}

/// Asks for approvals and reads the answers.
pub struct Questions {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for Questions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Questions(…)")
    }
}

impl Questions {
    /// Questions signed under a secret derived from the gateway's turn-identity key.
    pub fn new(signer: &TurnSigner) -> anyhow::Result<Self> {
        let secret = signer.derive_secret("rover mcp approval question v1")?;
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_audience(&[AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "aud", "sub"]);
        validation.leeway = 0;
        Ok(Self {
            encoding: EncodingKey::from_secret(&secret)?,
            decoding: DecodingKey::from_secret(&secret)?,
            validation,
        })
    }

    /// The `input_required` result asking `user` to approve `contract` with exactly `input`, in
    /// `turn`.
    pub fn ask(
        &self,
        user: UserId,
        turn: TurnId,
        contract: &ToolContract,
        input: &Value,
    ) -> Result<InputRequiredResult, ErrorData> {
        let question = Question {
            aud: AUDIENCE.to_owned(),
            sub: user.to_string(),
            exp: Utc::now().timestamp() + QUESTION_TTL_SECS,
            turn,
            tool: contract.name.to_owned(),
            input: input.clone(),
        };
        let state = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &question, &self.encoding)
            .map_err(|e| {
                ErrorData::internal_error(format!("The question could not be signed: {e}"), None)
            })?;
        let details = serde_json::to_string_pretty(input).unwrap_or_default();
        let result = json!({
            "resultType": "input_required",
            "inputRequests": {
                REQUEST_KEY: {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": format!(
                            "Your school requires your approval before Rover changes data.\n\n\
                             {} ({}) with exactly:\n{details}\n\nApprove it?",
                            contract.label.trim_end_matches('…'),
                            contract.name,
                        ),
                        "requestedSchema": {
                            "type": "object",
                            "properties": {
                                "approve": {
                                    "type": "boolean",
                                    "title": "Approve",
                                    "description": "Run this action exactly as shown.",
                                }
                            },
                            "required": ["approve"],
                        },
                    },
                }
            },
            "requestState": state,
        });
        serde_json::from_value(result)
            .map_err(|e| ErrorData::internal_error(format!("The question is malformed: {e}"), None))
    }

    /// Reads the answer to a question: `state` must be one this gateway signed for this very
    /// user, tool and input, and not expired.
    pub fn answer(
        &self,
        user: UserId,
        contract: &ToolContract,
        input: &Value,
        state: &str,
        responses: Option<&InputResponses>,
    ) -> Result<Answer, ErrorData> {
        let refused = || {
            ErrorData::invalid_params(
                "This approval does not belong to this call: it expired, was altered, or was \
                 asked for another call or person. Call the tool again to be asked afresh.",
                None,
            )
        };
        let question = jsonwebtoken::decode::<Question>(state, &self.decoding, &self.validation)
            .map_err(|_| refused())?
            .claims;
        if question.sub != user.to_string()
            || question.tool != contract.name
            || &question.input != input
        {
            return Err(refused());
        }
        let response = responses
            .and_then(|responses| responses.get(REQUEST_KEY))
            .cloned()
            .ok_or_else(|| ErrorData::invalid_params("The approval's answer is missing.", None))?;
        let response: ElicitResult = serde_json::from_value(response).map_err(|e| {
            ErrorData::invalid_params(format!("The approval's answer is unreadable: {e}"), None)
        })?;
        let approved = response.action == ElicitationAction::Accept
            && response
                .content
                .as_ref()
                .and_then(|content| content.get("approve"))
                .and_then(Value::as_bool)
                == Some(true);
        Ok(if approved {
            Answer::Approved(question.turn)
        } else {
            Answer::Declined
        })
    }
}
