//! The batch job for one attempt: its script (the spec's argv, quoted for
//! `/bin/sh`) and its properties (name and comment carrying the token, GRES
//! from the GPU count and type, time limit from the max runtime, working
//! directory, output files and environment).
//!
//! This module owns quoting and the job directory convention shared with
//! the local provider (`<jobs_dir>/<token>/{stdout.log,stderr.log,work,outputs}`);
//! it does no I/O. Secret values go into the job's environment only.

use super::v0038::JobProperties;
use crate::providers::LaunchRequest;
use crate::providers::local::layout::AttemptDir;
use std::collections::BTreeMap;
use std::path::Path;

/// The comment that marks a job as Canopy's: `canopy-token=<token>`.
pub const COMMENT_PREFIX: &str = "canopy-token=";

/// Quotes one word for `/bin/sh`: single quotes, with `'` as `'\''`.
pub fn quote(word: &str) -> String {
    if !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b)) {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The batch script: change to the working directory and `exec` the argv.
pub fn script(argv: &[String], workdir: &str, secret_file: Option<&str>) -> String {
    let words: Vec<String> = argv.iter().map(|w| quote(w)).collect();
    let secrets = secret_file
        .map(|p| format!("{}\n", crate::providers::secrets::source_and_remove(&quote(p))))
        .unwrap_or_default();
    format!(
        "#!/bin/sh\n# Canopy attempt: its secrets (if any) are loaded and their file removed, then the argv, quoted.\n{secrets}mkdir -p {wd} && cd {wd} || exit 1\nexec {}\n",
        words.join(" "),
        wd = quote(workdir)
    )
}

/// What the job asks for beyond the script.
#[derive(Debug, Clone, Default)]
pub struct Shaping {
    pub partition: Option<String>,
    /// GRES type of the pool, when it has one.
    pub gpu_type: Option<String>,
    /// Pin to the chosen node through a feature named after it.
    pub pin_node: Option<String>,
}

/// The job's properties for `req`, with its directory under `jobs_dir`.
pub fn properties(req: &LaunchRequest, jobs_dir: &Path, shaping: &Shaping) -> Result<JobProperties, String> {
    let dir = AttemptDir::at(jobs_dir, &req.token);
    let text =
        |p: &Path| p.to_str().map(str::to_string).ok_or_else(|| format!("path {} is not UTF-8", p.display()));
    let r = &req.spec.resources;
    let gres = match (r.gpus, &shaping.gpu_type) {
        (0, _) => None,
        (n, Some(t)) => Some(format!("gpu:{t}:{n}")),
        (n, None) => Some(format!("gpu:{n}")),
    };
    let time_limit = req.spec.constraints.max_runtime.map(|d| d.as_secs().div_ceil(60).max(1));
    let mut environment: BTreeMap<String, String> = BTreeMap::new();
    environment.insert("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into());
    environment.extend(req.spec.runtime.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    environment.insert("CANOPY_OUTPUT_DIR".into(), text(&dir.outputs())?);
    environment.insert("CANOPY_ATTEMPT_TOKEN".into(), req.token.clone());
    // Secrets never go here: slurmctld keeps a job's environment in its
    // state directory. They reach the job through its secret file.
    Ok(JobProperties {
        name: req.token.clone(),
        comment: format!("{COMMENT_PREFIX}{}", req.token),
        partition: shaping.partition.clone(),
        current_working_directory: text(dir.path())?,
        standard_output: text(&dir.stdout())?,
        standard_error: text(&dir.stderr())?,
        environment,
        gres,
        time_limit,
        nodes: 1,
        cpus_per_task: r.cpu_cores.ceil().max(1.0) as u32,
        memory_per_node: None,
        constraints: shaping.pin_node.clone(),
    })
}

/// The working directory the script changes to.
pub fn workdir(req: &LaunchRequest, jobs_dir: &Path) -> String {
    match &req.spec.runtime.workdir {
        Some(w) => w.clone(),
        None => AttemptDir::at(jobs_dir, &req.token).work().to_string_lossy().into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_the_shell() {
        let argv: Vec<String> =
            ["sh", "-c", "echo \"$X\" 'it''s'; exit 3", "", "a b", "$(rm -rf /)"].map(String::from).to_vec();
        let s = script(&argv, "/tmp/with space", None);
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("set -- ; {}", s.lines().last().unwrap().replacen("exec ", "printf '[%s]' ", 1)))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            "[sh][-c][echo \"$X\" 'it''s'; exit 3][][a b][$(rm -rf /)]"
        );
        assert!(s.contains("cd '/tmp/with space'"));
    }
}
