//! The batch job for one attempt: its script (the spec's argv, quoted for
//! `/bin/sh`) and its properties (name and comment carrying the token, GRES
//! from the GPU count and type, time limit from the max runtime, working
//! directory, output files and environment).
//!
//! This module owns quoting and the job directory convention shared with
//! the local provider (`<jobs_dir>/<token>/{stdout.log,stderr.log,work,outputs}`);
//! it does no I/O. Secret values go into the job's environment only.
//!
//! A gang (more than one node) is one job over all its nodes, pinned with
//! `nodelist`, whose batch script starts one launcher per node with
//! `srun --kill-on-bad-exit=1 --ntasks-per-node=1`: one launcher failing
//! stops the others. Each launcher finds its rank by its node's name
//! (`$SLURMD_NODENAME`; `$SLURM_NODEID` when the name is not listed) and
//! exports that rank's [`launcher_env`]; the variables every rank shares
//! go in the job's environment. Slurm's `srun` turns a SIGTERM into a
//! SIGKILL of its tasks, so a stop with grace signals the batch shell with
//! [`GANG_STOP_SIGNAL`] (ignored by default, so harmless to anything else
//! that receives it), and the shell asks Slurm to send SIGTERM to the
//! launch step only.

use super::v0038::JobProperties;
use crate::providers::LaunchRequest;
use crate::providers::gang::{Rank, launcher_env, rendezvous_port};
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

/// How a gang's launcher begins the line saying that its rank could not
/// start on its node, before why.
pub fn not_started_prefix(rank: impl std::fmt::Display, node: &str) -> String {
    format!("canopy: rank {rank} on {node} could not start: ")
}

/// What Canopy sends a gang's batch shell to stop it with grace: it
/// answers with SIGTERM to the launch step (see the module doc).
pub const GANG_STOP_SIGNAL: &str = "SIGURG";

/// One launcher's environment: name and value, in order.
pub type Env = Vec<(String, String)>;

/// Every rank's launcher environment, rank order: `addrs` are the nodes'
/// addresses as Slurm knows them.
pub fn rank_envs(req: &LaunchRequest, addrs: &[String]) -> Vec<Env> {
    let port = rendezvous_port(&req.token);
    (0..req.nodes.len())
        .map(|rank| {
            launcher_env(&Rank {
                rank,
                nodes: &req.nodes,
                addrs,
                gpus_per_node: req.spec.resources.gpus,
                port,
            })
        })
        .collect()
}

/// Splits rank environments into what every rank shares and, per rank,
/// what is its own.
pub fn split_envs(envs: &[Env]) -> (Env, Vec<Env>) {
    let Some(first) = envs.first() else { return (Vec::new(), Vec::new()) };
    let shared: Vec<(String, String)> =
        first.iter().filter(|kv| envs.iter().all(|e| e.contains(kv))).cloned().collect();
    let own = envs.iter().map(|e| e.iter().filter(|kv| !shared.contains(kv)).cloned().collect()).collect();
    (shared, own)
}

/// The command srun runs on each node: a launcher that finds its rank by
/// node name (`$SLURM_NODEID` when the name is not listed), exports that
/// rank's own variables, changes to the working directory and `exec`s the
/// argv. When its rank cannot start there (the working directory cannot
/// be entered, the program is not found on that node) it says so on
/// stderr ([`not_started_prefix`]), and exits non-zero, so
/// srun stops the other ranks and the adapter can tell a rank that never
/// started from one that ran and failed ([`super::map::rank_end`]).
pub fn launcher_command(
    argv: &[String],
    workdir: &str,
    nodes: &[String],
    own_env: &[Vec<(String, String)>],
) -> String {
    let mut by_name = String::new();
    for (rank, node) in nodes.iter().enumerate() {
        by_name.push_str(&format!("{}) canopy_rank={rank} ;;\n", quote(node)));
    }
    let mut by_rank = String::new();
    for (rank, env) in own_env.iter().enumerate() {
        let vars: Vec<String> = env.iter().map(|(k, v)| format!("{k}={}", quote(v))).collect();
        by_rank.push_str(&format!("{rank}) export {} ;;\n", vars.join(" ")));
    }
    let launcher = format!(
        "case $SLURMD_NODENAME in\n{by_name}*) canopy_rank=$SLURM_NODEID ;;\nesac\n\
         case $canopy_rank in\n{by_rank}*) echo \"canopy: node $SLURMD_NODENAME is not one of this gang's nodes\" >&2; exit 1 ;;\nesac\n\
         mkdir -p {wd} && cd {wd} || {{ printf '%s\\n' \"{said} cannot enter \"{wd} >&2; exit 1; }}\n\
         command -v \"$1\" >/dev/null 2>&1 || {{ printf '%s\\n' \"{said} $1: not found\" >&2; exit 127; }}\n\
         exec \"$@\"\n",
        wd = quote(workdir),
        said = not_started_prefix("$canopy_rank", "$SLURMD_NODENAME").trim_end(),
    );
    let words: Vec<String> = argv.iter().map(|w| quote(w)).collect();
    format!("/bin/sh -c {} canopy-rank {}", quote(&launcher), words.join(" "))
}

/// The batch script of a gang: secrets loaded (srun hands the environment
/// to every launcher), the stop-with-grace trap, then one launcher per
/// node through `srun`, whose exit status is the job's.
pub fn gang_script(
    argv: &[String],
    workdir: &str,
    secret_file: Option<&str>,
    nodes: &[String],
    own_env: &[Vec<(String, String)>],
) -> String {
    let n = nodes.len();
    let secrets = secret_file
        .map(|p| format!("{}\n", crate::providers::secrets::source_and_remove(&quote(p))))
        .unwrap_or_default();
    format!(
        "#!/bin/sh\n# Canopy gang attempt: its secrets (if any) are loaded and their file removed, then one \
         launcher per node.\n{secrets}\
         # A stop with grace: SIGTERM to the launchers (srun would turn it into SIGKILL).\n\
         trap 'scancel --quiet --signal=TERM \"$SLURM_JOB_ID.0\"' URG\n\
         # srun's status goes through a file: a `wait` that the trap cuts short returns 151, and srun may\n\
         # have been reaped while the trap ran, its status then never reported.\n\
         canopy_rcfile=$(mktemp) || exit 1\n\
         ( srun --kill-on-bad-exit=1 --nodes={n} --ntasks={n} --ntasks-per-node=1 {task}; \
         echo $? > \"$canopy_rcfile\" ) &\n\
         canopy_srun=$!\n\
         while kill -0 $canopy_srun 2>/dev/null; do wait $canopy_srun; done\n\
         canopy_rc=$(cat \"$canopy_rcfile\"); rm -f \"$canopy_rcfile\"\n\
         exit ${{canopy_rc:-1}}\n",
        task = launcher_command(argv, workdir, nodes, own_env),
    )
}

/// A gang's job properties: `properties` over all its nodes, pinned to
/// them, one task per node, with what every launcher shares in the job's
/// environment.
pub fn gang_properties(
    req: &LaunchRequest,
    jobs_dir: &Path,
    shaping: &Shaping,
    shared_env: &[(String, String)],
) -> Result<JobProperties, String> {
    let mut p = properties(req, jobs_dir, &Shaping { pin_node: None, ..shaping.clone() })?;
    let n = req.nodes.len() as u32;
    p.nodes = n;
    p.tasks = Some(n);
    p.tasks_per_node = Some(1);
    p.nodelist = Some(req.nodes.join(","));
    p.environment.extend(shared_env.iter().cloned());
    Ok(p)
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
    if !req.is_gang() {
        environment.extend(crate::providers::gang::one_node_env(
            &req.node,
            req.spec.resources.gpus,
            &req.token,
        ));
    }
    // Checkpoints are handed on in place: Canopy's checkpoint directory must
    // be on a file system the nodes share (docs/engines.md).
    if let Some(d) = &req.checkpoint_dir {
        environment.insert("CANOPY_CHECKPOINT_DIR".into(), text(d)?);
    }
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
        tasks: None,
        tasks_per_node: None,
        nodelist: None,
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

    /// The launcher as srun would run it on each node: the rank found by
    /// node name (or node id), its own variables exported, the argv run.
    #[test]
    fn each_gang_launcher_finds_its_rank_and_environment() {
        let nodes = vec!["n2".to_string(), "n1".to_string()];
        let envs = vec![
            vec![("MASTER_ADDR".to_string(), "10.0.0.2".to_string()), ("NODE_RANK".into(), "0".into())],
            vec![("MASTER_ADDR".to_string(), "10.0.0.2".to_string()), ("NODE_RANK".into(), "1".into())],
        ];
        let (shared, own) = split_envs(&envs);
        assert_eq!(shared, vec![("MASTER_ADDR".to_string(), "10.0.0.2".to_string())]);
        assert_eq!(own[1], vec![("NODE_RANK".to_string(), "1".to_string())]);
        let argv: Vec<String> =
            ["sh", "-c", "echo \"rank=$NODE_RANK it's $0\"", "a b"].map(String::from).to_vec();
        let t = tempfile::tempdir().unwrap();
        let wd = t.path().join("w d").to_string_lossy().into_owned();
        let s = gang_script(&argv, &wd, None, &nodes, &own);
        assert!(s.contains("srun --kill-on-bad-exit=1 --nodes=2 --ntasks=2 --ntasks-per-node=1"), "{s}");
        let task = launcher_command(&argv, &wd, &nodes, &own);
        assert!(s.contains(&task));
        for (name, id, want) in
            [("n1", "0", "rank=1 it's a b"), ("n2", "1", "rank=0 it's a b"), ("n9", "1", "rank=1 it's a b")]
        {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(&task)
                .env("SLURMD_NODENAME", name)
                .env("SLURM_NODEID", id)
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                want,
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(std::path::Path::new(&wd).is_dir(), "the launcher made its working directory");
    }

    /// A stop with grace that arrives as srun ends reports srun's status,
    /// not the 151 of a `wait` cut short by the trap. Fake `srun` and
    /// `scancel` stand in for Slurm's: srun signals the batch shell and
    /// ends with 3 while the trap's scancel is still running, so the shell
    /// reaps srun before its `wait` returns.
    #[test]
    fn a_stop_as_srun_ends_keeps_sruns_status() {
        let t = tempfile::tempdir().unwrap();
        let bin = t.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let called = t.path().join("scancel.args");
        let fake = |name: &str, body: String| {
            use std::os::unix::fs::PermissionsExt;
            let f = bin.join(name);
            std::fs::write(&f, format!("#!/bin/sh\n{body}")).unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        // Every ancestor running batch.sh: the batch shell (and a subshell
        // of it, to which SIGURG means nothing).
        fake(
            "srun",
            "p=$PPID\nwhile [ \"$p\" -gt 1 ]; do \
             tr '\\0' ' ' < /proc/$p/cmdline | grep -q batch.sh && kill -URG $p; \
             p=$(cut -d' ' -f4 /proc/$p/stat); done\nsleep 0.2\nexit 3\n"
                .into(),
        );
        fake("scancel", format!("echo \"$@\" > {}\nsleep 1\n", called.display()));
        let argv: Vec<String> = ["true"].map(String::from).to_vec();
        let nodes = vec!["n1".to_string(), "n2".to_string()];
        let own = vec![vec![], vec![]];
        let wd = t.path().join("w").to_string_lossy().into_owned();
        let batch = t.path().join("batch.sh");
        std::fs::write(&batch, gang_script(&argv, &wd, None, &nodes, &own)).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let out = std::process::Command::new("sh")
            .arg(&batch)
            .env("PATH", path)
            .env("SLURM_JOB_ID", "77")
            .env("TMPDIR", t.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(std::fs::read_to_string(&called).unwrap_or_default().trim(), "--quiet --signal=TERM 77.0");
        assert_eq!(out.status.code(), Some(3), "the job's status is srun's: {stderr}");
        let left: Vec<_> = std::fs::read_dir(t.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left.len(), 3, "the status file is removed: {left:?}");
    }

    /// Run by sh as srun would on node n2, a launcher whose program is not
    /// there, or whose working directory cannot be made, says that its
    /// rank could not start there and fails, so srun stops the others.
    #[test]
    fn a_launcher_that_cannot_start_its_rank_says_so() {
        let nodes = vec!["n1".to_string(), "n2".to_string()];
        let own =
            vec![vec![("NODE_RANK".to_string(), "0".to_string())], vec![("NODE_RANK".into(), "1".into())]];
        let t = tempfile::tempdir().unwrap();
        let run = |argv: &[&str], wd: &str| {
            let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(launcher_command(&argv, wd, &nodes, &own))
                .env("SLURMD_NODENAME", "n2")
                .env("SLURM_NODEID", "1")
                .output()
                .unwrap();
            (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
        };
        let wd = t.path().join("w d").to_string_lossy().into_owned();
        let missing = t.path().join("not-on-n2/train").to_string_lossy().into_owned();
        let (code, stderr) = run(&[&missing, "--lr", "1"], &wd);
        assert_eq!(code, Some(127), "{stderr}");
        let said = format!("{}{missing}: not found", not_started_prefix(1, "n2"));
        assert_eq!(stderr.trim(), said);
        // A file where the working directory should be: it cannot be made.
        let file = t.path().join("file");
        std::fs::write(&file, "").unwrap();
        let blocked = file.join("w").to_string_lossy().into_owned();
        let (code, stderr) = run(&["true"], &blocked);
        assert_eq!(code, Some(1), "{stderr}");
        let said = format!("{}cannot enter {blocked}", not_started_prefix(1, "n2"));
        assert!(stderr.lines().any(|l| l == said), "{stderr}");
        // A program that is there runs, and its own failure is its own.
        let (code, stderr) = run(&["sh", "-c", "exit 127"], &wd);
        assert_eq!((code, stderr.as_str()), (Some(127), ""));
    }
}
