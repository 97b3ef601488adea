//! The log lines a fault leaves behind, written the way PyTorch, NCCL, the
//! NVIDIA driver and Slurm print them, so Canopy's classifier reads a
//! simulated failure exactly as it would read a real one.
//!
//! Pure: text from the fault, the placement and a seeded stream. It never
//! names the failure class; finding it is the classifier's job.

use super::faults::RunFault;
use super::rng::Rng;
use crate::engine::model::Millis;
use crate::fleet::Lifecycle;

/// Where the fault happened, for the details of its lines.
#[derive(Debug, Clone, PartialEq)]
pub struct SignatureContext<'a> {
    pub lifecycle: Lifecycle,
    pub node: &'a str,
    pub provider_ref: &'a str,
    pub gpus: u32,
    pub nvidia: bool,
    /// Memory per GPU in GB (0 for CPU pools).
    pub gpu_memory_gb: f64,
    pub now: Millis,
}

/// The stderr lines to append after the workload's own stderr, ending in a
/// newline; empty when the fault leaves nothing in the workload's log.
pub fn stderr_tail(fault: RunFault, ctx: &SignatureContext<'_>, rng: &mut Rng) -> String {
    let rank = rng.below(u64::from(ctx.gpus.max(1)));
    let pid = 20_000 + rng.below(60_000);
    let lines: Vec<String> = match fault {
        RunFault::NcclTimeout => nccl_watchdog(rank, rng),
        RunFault::CudaOom => gpu_oom(rank, pid, ctx, rng),
        RunFault::Xid79 => xid79(pid, rng),
        RunFault::NoSpace => no_space(rng),
        RunFault::NodeLost | RunFault::Preempted => slurm_cancel(fault, ctx),
    };
    let mut out = lines.join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

fn nccl_watchdog(rank: u64, rng: &mut Rng) -> Vec<String> {
    let seq = 10_000 + rng.below(400_000);
    let numel = 1u64 << (16 + rng.below(10));
    let ran = 600_000 + rng.below(200);
    let work = format!(
        "WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=600000)"
    );
    let p = format!("[rank{rank}]:[E ProcessGroupNCCL.cpp");
    vec![
        format!(
            "{p}:607] [Rank {rank}] Watchdog caught collective operation timeout: {work} ran for {ran} milliseconds before timing out."
        ),
        format!(
            "{p}:1664] [PG 0 (default_pg) Rank {rank}] Exception (either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {}, last completed NCCL work: {}.",
            seq + 1,
            seq - 1
        ),
        format!(
            "{p}:621] [Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data."
        ),
        format!("{p}:627] [Rank {rank}] To avoid data inconsistency, we are taking the entire process down."),
        "terminate called after throwing an instance of 'c10::DistBackendError'".to_string(),
        format!(
            "  what():  [Rank {rank}] Watchdog caught collective operation timeout: {work} ran for {ran} milliseconds before timing out."
        ),
        "Fatal Python error: Aborted".to_string(),
    ]
}

fn gpu_oom(rank: u64, pid: u64, ctx: &SignatureContext<'_>, rng: &mut Rng) -> Vec<String> {
    // Marketing GB to what the driver reports in GiB, less a little reserve.
    let total = if ctx.gpu_memory_gb > 0.0 { ctx.gpu_memory_gb * 0.9894 } else { 79.15 };
    let free = rng.range(0.2, 2.5).min(total / 4.0);
    let want = free + rng.range(0.5, 4.0);
    let used = total - free;
    let api = if ctx.nvidia { "CUDA" } else { "HIP" };
    let r = format!("[rank{rank}]: ");
    vec![
        format!("{r}Traceback (most recent call last):"),
        format!("{r}  File \"/workspace/train.py\", line 388, in main"),
        format!("{r}    loss.backward()"),
        format!(
            "{r}  File \"/usr/local/lib/python3.10/dist-packages/torch/_tensor.py\", line 525, in backward"
        ),
        format!("{r}    torch.autograd.backward("),
        format!(
            "{r}torch.OutOfMemoryError: {api} out of memory. Tried to allocate {want:.2} GiB. GPU {rank} has a total capacity of {total:.2} GiB of which {free:.2} GiB is free. Process {pid} has {used:.2} GiB memory in use."
        ),
    ]
}

fn xid79(pid: u64, rng: &mut Rng) -> Vec<String> {
    let bus = 0x10 + rng.below(0xd0);
    let uptime = 1_000.0 + rng.range(0.0, 900_000.0);
    let uuid = format!("{}-{}-{}-{}-{}", rng.hex(8), rng.hex(4), rng.hex(4), rng.hex(4), rng.hex(12));
    vec![
        "Traceback (most recent call last):".to_string(),
        "  File \"/workspace/train.py\", line 402, in <module>".to_string(),
        "    optimizer.step()".to_string(),
        "RuntimeError: CUDA error: unknown error".to_string(),
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.".to_string(),
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1".to_string(),
        "--- kernel log (dmesg, last 2 lines) ---".to_string(),
        format!("[{uptime:.6}] NVRM: GPU at PCI:0000:{bus:02x}:00: GPU-{uuid}"),
        format!("[{uptime:.6}] NVRM: Xid (PCI:0000:{bus:02x}:00): 79, pid={pid}, name=python, GPU has fallen off the bus."),
    ]
}

fn no_space(rng: &mut Rng) -> Vec<String> {
    let step = 500 * (1 + rng.below(100));
    vec![
        "Traceback (most recent call last):".to_string(),
        "  File \"/workspace/train.py\", line 301, in save_checkpoint".to_string(),
        "    torch.save(state, path)".to_string(),
        "  File \"/usr/local/lib/python3.10/dist-packages/torch/serialization.py\", line 651, in save"
            .to_string(),
        "    with _open_zipfile_writer(f) as opened_zipfile:".to_string(),
        format!("OSError: [Errno 28] No space left on device: '/scratch/ckpt/step_{step}/model.pt'"),
    ]
}

/// Slurm tells the job's stderr why it was cancelled; clouds and
/// Kubernetes just kill the process.
fn slurm_cancel(fault: RunFault, ctx: &SignatureContext<'_>) -> Vec<String> {
    if ctx.lifecycle != Lifecycle::Job {
        return Vec::new();
    }
    let id = ctx.provider_ref.trim_start_matches("job ");
    let why = if fault == RunFault::Preempted {
        "PREEMPTION"
    } else {
        "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS"
    };
    vec![format!(
        "slurmstepd: error: *** JOB {id} ON {} CANCELLED AT {} DUE TO {why} ***",
        ctx.node,
        iso_utc(ctx.now)
    )]
}

/// `2024-05-02T19:40:41` (UTC) from milliseconds since the epoch.
pub fn iso_utc(t: Millis) -> String {
    let secs = t.0.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(lifecycle: Lifecycle) -> SignatureContext<'static> {
        SignatureContext {
            lifecycle,
            node: "fra-h100-03",
            provider_ref: "job 48213",
            gpus: 8,
            nvidia: true,
            gpu_memory_gb: 80.0,
            now: Millis(1_714_678_841_000),
        }
    }

    #[test]
    fn each_in_workload_fault_carries_its_classic_line() {
        let c = ctx(Lifecycle::Vm);
        let tail = |f| stderr_tail(f, &c, &mut Rng::stream(1, "sig", "t"));
        assert!(tail(RunFault::NcclTimeout).contains("Watchdog caught collective operation timeout"));
        assert!(tail(RunFault::CudaOom).contains("CUDA out of memory. Tried to allocate"));
        assert!(tail(RunFault::Xid79).contains("): 79, pid="));
        assert!(tail(RunFault::Xid79).contains("GPU has fallen off the bus."));
        assert!(tail(RunFault::NoSpace).contains("[Errno 28] No space left on device"));
        assert_eq!(tail(RunFault::NodeLost), "");
        assert_eq!(tail(RunFault::Preempted), "");
        for f in RunFault::ALL {
            let t = tail(f);
            assert!(t.is_empty() || t.ends_with('\n'));
        }
        let amd = SignatureContext { nvidia: false, ..c };
        assert!(
            stderr_tail(RunFault::CudaOom, &amd, &mut Rng::stream(1, "s", "t")).contains("HIP out of memory")
        );
    }

    #[test]
    fn slurm_says_why_it_cancelled_a_job() {
        let t = stderr_tail(RunFault::NodeLost, &ctx(Lifecycle::Job), &mut Rng::stream(1, "s", "t"));
        assert_eq!(
            t,
            "slurmstepd: error: *** JOB 48213 ON fra-h100-03 CANCELLED AT 2024-05-02T19:40:41 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***\n"
        );
    }

    #[test]
    fn iso_dates() {
        assert_eq!(iso_utc(Millis(0)), "1970-01-01T00:00:00");
        assert_eq!(iso_utc(Millis(951_782_400_000)), "2000-02-29T00:00:00");
    }
}
