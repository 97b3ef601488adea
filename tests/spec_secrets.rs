//! A secret written into a spec is reported, and never repeated: not in a
//! message, a help line, a rendered source line, Debug output or JSON.

use canopy::spec::{Format, load};

const HF: &str = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
const GH: &str = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
const AWS: &str = "AKIAIOSFODNN7EXAMPLE";
const PLAIN: &str = "correct-horse-battery-staple";
const JWT: &str =
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
const PEM_BODY: &str = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7";

/// Every way the outcome can be shown to a user or written down.
fn everything_shown(src: &str, format: Format) -> String {
    match load::parse(src, "spec.toml", format) {
        Ok(loaded) => loaded
            .warnings
            .iter()
            .map(|d| format!("{d}\n{}\n{d:?}\n{}", d.render(src), serde_json::to_string(d).unwrap()))
            .collect(),
        Err(e) => {
            format!("{e}\n{}\n{e:?}\n{}", e.render(src), serde_json::to_string(&e.diagnostics).unwrap())
        }
    }
}

fn assert_hidden(src: &str, format: Format, secrets: &[&str], must_mention: &str) {
    let shown = everything_shown(src, format);
    for s in secrets {
        assert!(!shown.contains(s), "secret {s:?} leaked in:\n{shown}");
    }
    assert!(shown.contains(must_mention), "expected {must_mention:?} in:\n{shown}");
}

#[test]
fn inline_secrets_are_errors_that_never_repeat_the_value() {
    let src = format!(
        "name = \"x\"\n[runtime]\ncommand = [\"python\", \"--token\", \"{GH}\"]\nsecrets = [\"WANDB_API_KEY\"]\n\
         [runtime.env]\nHF_TOKEN = \"{HF}\"\nDB_PASSWORD = \"{PLAIN}\"\nAWS_ID = \"{AWS}\"\nSESSION = \"{JWT}\"\n\
         TLS = \"\"\"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----\"\"\"\n"
    );
    let err = load::parse(&src, "spec.toml", Format::Toml).unwrap_err();
    let inline: Vec<&str> = err
        .diagnostics
        .iter()
        .filter(|d| d.message.starts_with("a secret value is written inline"))
        .map(|d| d.path.as_str())
        .collect();
    assert_eq!(
        inline,
        [
            "runtime.command[2]",
            "runtime.env.HF_TOKEN",
            "runtime.env.DB_PASSWORD",
            "runtime.env.AWS_ID",
            "runtime.env.SESSION",
            "runtime.env.TLS"
        ]
    );
    let hf = err.diagnostics.iter().find(|d| d.path == "runtime.env.HF_TOKEN").unwrap();
    assert_eq!(hf.message, "a secret value is written inline in runtime.env.HF_TOKEN");
    assert_eq!(hf.help.as_deref(), Some("move it out of the spec and list `HF_TOKEN` in runtime.secrets"));
    assert_hidden(&src, Format::Toml, &[HF, GH, AWS, PLAIN, JWT, PEM_BODY], "runtime.env.TLS");
}

#[test]
fn harmless_values_under_secret_sounding_names_pass() {
    let src = "name = \"x\"\n[runtime]\ncommand = [\"a\"]\n[runtime.env]\nTOKENIZERS_PARALLELISM = \"false\"\nMAX_TOKENS = \"4096\"\nTOKEN_LIMIT = \"4096\"\nGOOGLE_APPLICATION_CREDENTIALS = \"/secrets/gcp.json\"\nHF_HUB_ENABLE_HF_TRANSFER = \"1\"\n";
    let loaded = load::parse(src, "spec.toml", Format::Toml).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn secrets_do_not_leak_through_type_errors() {
    // The value sits where serde quotes what it found.
    let cases = [
        format!("name = \"x\"\npriority = \"{HF}\"\n[runtime]\ncommand = [\"a\"]\n"),
        format!("name = \"x\"\nkind = \"{GH}\"\n[runtime]\ncommand = [\"a\"]\n"),
        format!("name = \"x\"\n[runtime]\ncommand = [\"a\"]\n[constraints]\nmax_runtime = \"{AWS}\"\n"),
        format!("name = \"x\"\n[runtime]\ncommand = [\"a\"]\nenv = {{ HF_TOKEN = [\"{HF}\"] }}\n"),
        // A plain word is only known to be secret from its key; parsing stops
        // at the bad `kind` before the env table is even deserialized.
        format!(
            "name = \"x\"\nkind = \"{PLAIN}\"\n[runtime]\ncommand = [\"a\"]\nenv = {{ DB_PASSWORD = \"{PLAIN}\" }}\n"
        ),
    ];
    for src in &cases {
        assert_hidden(src, Format::Toml, &[HF, GH, AWS, PLAIN], "error");
    }
}

#[test]
fn secrets_in_json_are_hidden_too() {
    let src = format!(
        "{{\"name\": \"x\", \"runtime\": {{\"command\": [\"a\"], \"env\": {{\"HF_TOKEN\": \"{PLAIN}\", \"OTHER\": \"{HF}\"}}}}}}"
    );
    assert_hidden(&src, Format::Json, &[PLAIN, HF], "runtime.env.OTHER");
    let src = format!("{{\"name\": \"x\", \"kind\": \"{GH}\", \"runtime\": {{\"command\": [\"a\"]}}}}");
    assert_hidden(&src, Format::Json, &[GH], "unknown value");
}

#[test]
fn credentials_in_uris_and_labels_are_caught() {
    let src = format!(
        "name = \"x\"\nlabels = {{ owner = \"{HF}\" }}\n[runtime]\ncommand = [\"a\"]\n\
         [[inputs]]\nname = \"a\"\nsource = \"https://bob:{PLAIN}@data.example.com/x\"\n\
         [[inputs]]\nname = \"b\"\nsource = \"https://data.example.com/x?X-Amz-Signature={PLAIN}\"\n"
    );
    let err = load::parse(&src, "spec.toml", Format::Toml).unwrap_err();
    let paths: Vec<&str> = err.diagnostics.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(paths, ["labels.owner", "inputs[0].source", "inputs[1].source"]);
    assert_hidden(&src, Format::Toml, &[HF, PLAIN], "inputs[1].source");
}

#[test]
fn a_secret_listed_by_value_is_caught() {
    let src = format!("name = \"x\"\n[runtime]\ncommand = [\"a\"]\nsecrets = [\"{HF}\"]\n");
    let err = load::parse(&src, "spec.toml", Format::Toml).unwrap_err();
    assert_eq!(
        err.diagnostics[0].message,
        "runtime.secrets[0] looks like a secret value, not the name of a secret"
    );
    assert_hidden(&src, Format::Toml, &[HF], "runtime.secrets[0]");
}
