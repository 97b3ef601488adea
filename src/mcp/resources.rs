//! Small text artifacts as MCP resources:
//! `canopy://workloads/{id}/artifacts/{attempt}/{name}`, read through the
//! API's artifact routes as the caller (so only what it may see).

use super::calls::RESOURCE_MAX;
use super::upstream::{Call, Upstream};
use rmcp::ErrorData;
use rmcp::model::{ReadResourceResult, ResourceContents, ResourceTemplate};

const PREFIX: &str = "canopy://workloads/";

pub fn template() -> ResourceTemplate {
    let mut t = ResourceTemplate::new(format!("{PREFIX}{{id}}/artifacts/{{attempt}}/{{name}}"), "artifact");
    t.description = Some(format!(
        "A workload's collected output file, as text, when it is UTF-8 and at most {} KiB (the `artifacts` tool \
         lists them with their uri)",
        RESOURCE_MAX / 1024
    ));
    t.mime_type = Some("text/plain".into());
    t
}

/// The workload, attempt and (still percent-encoded) name of `uri`.
fn parse(uri: &str) -> Option<(crate::engine::model::WorkloadId, u32, &str)> {
    let rest = uri.strip_prefix(PREFIX)?;
    let mut it = rest.splitn(4, '/');
    let id = it.next()?.parse().ok()?;
    (it.next()? == "artifacts").then_some(())?;
    let attempt = it.next()?.parse().ok()?;
    let name = it.next().filter(|n| !n.is_empty() && !n.contains('/'))?;
    Some((id, attempt, name))
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads the artifact `uri` names: refused when it is not one, is larger
/// than [`RESOURCE_MAX`] or is not UTF-8 text; control characters replaced.
pub async fn read(up: &Upstream, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let bad = |m: String| ErrorData::invalid_params(m, None);
    let Some((id, attempt, name)) = parse(uri) else {
        return Err(bad(format!("{uri:?} is not an artifact; they are {PREFIX}ID/artifacts/ATTEMPT/NAME")));
    };
    let list = up.send(Call::get(format!("/v1/workloads/{id}/artifacts"))).await.map_err(&bad)?;
    if !list.ok() {
        return Err(ErrorData::resource_not_found(list.message(), None));
    }
    let decoded = decode(name);
    let found = list
        .json()
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["attempt"].as_u64() == Some(u64::from(attempt)) && a["name"].as_str() == Some(&decoded))
        .cloned();
    let Some(found) = found else {
        return Err(ErrorData::resource_not_found(
            format!("{id} attempt {attempt} has no output {decoded:?}"),
            None,
        ));
    };
    let bytes = found["bytes"].as_u64().unwrap_or(u64::MAX);
    if bytes > RESOURCE_MAX {
        return Err(bad(format!(
            "{decoded} is {bytes} bytes, over the {} KiB a resource may be; download it from the API ({})",
            RESOURCE_MAX / 1024,
            found["download"].as_str().unwrap_or("GET /v1/workloads/ID/artifacts/ATTEMPT/NAME")
        )));
    }
    // Encoded again from the decoded name: whatever the URI held, the
    // path names this one file.
    let path = format!("/v1/workloads/{id}/artifacts/{attempt}/{}", crate::client::encode(&decoded));
    let a = up.send(Call::get(path)).await.map_err(&bad)?;
    if !a.ok() {
        return Err(ErrorData::resource_not_found(a.message(), None));
    }
    let text = String::from_utf8(a.body)
        .map_err(|_| bad(format!("{decoded} is not UTF-8 text; download it from the API instead")))?;
    let text = crate::text::sanitize_lines(&text).into_owned();
    Ok(ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
        uri: uri.to_string(),
        mime_type: Some("text/plain".into()),
        text,
        meta: None,
    }]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_uris_name_a_workload_attempt_and_file() {
        let (id, n, name) = parse("canopy://workloads/w-7/artifacts/2/out%20put.txt").expect("parses");
        assert_eq!((id.to_string().as_str(), n, name), ("w-7", 2, "out%20put.txt"));
        assert_eq!(decode(name), "out put.txt");
        for bad in
            ["canopy://workloads/w-7/logs/2/x", "canopy://workloads/w-7/artifacts/x/y", "file:///etc/passwd"]
        {
            assert!(parse(bad).is_none(), "{bad}");
        }
        assert!(parse("canopy://workloads/w-7/artifacts/1/a/b").is_none());
    }
}
