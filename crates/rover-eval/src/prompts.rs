//! `rover-eval --prompts`: what each demo user's first model request carries before the staff
//! member says anything — the system prompt and the tool definitions — built exactly as the
//! worker builds them (from a runtime context minted from a freshly seeded database). With a
//! llama.cpp server (`--model-url`), the count is exact: the request rendered by the model's own
//! chat template (`/apply-template`) and tokenised by its tokenizer (`/tokenize`); without one,
//! it is the worker's own estimate (`compact::estimate`, about four bytes a token).

use std::time::Duration;

use anyhow::Context as _;
use rover_agent::skills::SkillLibrary;
use rover_agent::{Mounts, build_agent};
use rover_domain::seed::DEMO_USERS;
use rover_domain::testing::TestDb;
use serde::Serialize;
use serde_json::{Value, json};

/// One demo user's fixed prompt.
#[derive(Debug, Clone, Serialize)]
pub struct PromptSize {
    pub user: String,
    /// Characters of the system prompt.
    pub system_chars: usize,
    /// Tools offered.
    pub tools: usize,
    /// Estimated tokens (system prompt + tool definitions), as the worker budgets them.
    pub estimated_tokens: usize,
    /// Tokens of the rendered request (system prompt, tools, an empty user turn), when a
    /// llama.cpp server was asked.
    pub tokens: Option<usize>,
    /// The system prompt itself, and the tool definitions.
    #[serde(skip)]
    pub system_prompt: String,
    #[serde(skip)]
    pub tool_definitions: Vec<&'static Value>,
    /// Each specialist's (name, system prompt, tool definitions).
    #[serde(skip)]
    pub subagents: Vec<(String, String, Vec<&'static Value>)>,
}

/// Measures every demo user's fixed prompt; `model_url` is a llama.cpp server's `/v1` base.
pub async fn measure(model_url: Option<&str>, sandbox: bool) -> anyhow::Result<Vec<PromptSize>> {
    let db = TestDb::new().await;
    let skills =
        SkillLibrary::load(&rover_stack::skills_dir()).context("Failed to load the skills")?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?;
    let mut sizes = Vec::new();
    for email in DEMO_USERS {
        let school = db.ids.school_of(email);
        let mut tx = rover_domain::begin_tenant(&db.pool, school).await?;
        let context =
            rover_domain::context::runtime_context(&mut tx, db.ids.user(email), None, Vec::new())
                .await
                .with_context(|| format!("Failed to mint the runtime context of {email}"))?;
        tx.rollback().await?;
        let agent = build_agent(&context, &skills, Mounts { sandbox });
        let tools = agent.tool_definitions();
        let estimated_tokens =
            rover_agent::compact::fixed_cost(&agent.system_prompt, &tools, &json!({}));
        let tokens = match model_url {
            Some(url) => Some(
                count(&http, url, &agent.system_prompt, &tools)
                    .await
                    .with_context(|| format!("Failed to count {email}'s prompt at {url}"))?,
            ),
            None => None,
        };
        sizes.push(PromptSize {
            user: email.to_owned(),
            system_chars: agent.system_prompt.chars().count(),
            tools: tools.len(),
            estimated_tokens,
            tokens,
            system_prompt: agent.system_prompt.clone(),
            tool_definitions: tools,
            subagents: agent
                .subagents
                .iter()
                .map(|s| {
                    (
                        s.name().to_owned(),
                        s.system_prompt.clone(),
                        s.tool_definitions(),
                    )
                })
                .collect(),
        });
    }
    Ok(sizes)
}

/// The tokens of the request rendered by the server's chat template.
async fn count(
    http: &reqwest::Client,
    base_url: &str,
    system: &str,
    tools: &[&Value],
) -> anyhow::Result<usize> {
    let root = base_url.trim_end_matches('/').trim_end_matches("/v1");
    let rendered: Value = http
        .post(format!("{root}/apply-template"))
        .json(&json!({
            "messages": [{ "role": "system", "content": system }, { "role": "user", "content": "" }],
            "tools": tools,
        }))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let prompt = rendered["prompt"]
        .as_str()
        .context("/apply-template returned no prompt")?;
    let tokens: Value = http
        .post(format!("{root}/tokenize"))
        .json(&json!({ "content": prompt }))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    tokens["tokens"]
        .as_array()
        .map(Vec::len)
        .context("/tokenize returned no tokens")
}

/// Writes each user's system prompt and tool definitions to `dir/<user>.txt` (and each of
/// their specialists' to `dir/<user>.<specialist>.txt`), for reading.
pub fn write(sizes: &[PromptSize], dir: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let file = |name: String, system: &str, tools: &[&Value]| -> anyhow::Result<()> {
        let tools = serde_json::to_string_pretty(tools)?;
        std::fs::write(dir.join(name), format!("{system}\n\n# tools\n{tools}\n"))?;
        Ok(())
    };
    for s in sizes {
        file(
            format!("{}.txt", s.user),
            &s.system_prompt,
            &s.tool_definitions,
        )?;
        for (name, system, tools) in &s.subagents {
            file(format!("{}.{name}.txt", s.user), system, tools)?;
        }
    }
    Ok(())
}

/// The Markdown table of `sizes`.
pub fn table(sizes: &[PromptSize]) -> String {
    let mut out = String::from(
        "| user | tools | system prompt chars | estimated tokens | tokens (template) |\n|---|--:|--:|--:|--:|\n",
    );
    for s in sizes {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            s.user,
            s.tools,
            s.system_chars,
            s.estimated_tokens,
            s.tokens.map_or("–".to_owned(), |t| t.to_string())
        ));
    }
    out
}
