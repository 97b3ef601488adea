//! Log signatures of the accelerators beyond NVIDIA's and AMD's (see
//! `docs/accelerators.md`): their device out-of-memory messages, their
//! collective libraries' timeouts and errors, and their hardware faults.
//! The rules that use them sit in [`super::rules::RULES`]; each needle
//! below names where it was seen, and the failure corpus
//! (`tests/corpus/failures/index.toml`) has a case per library citing it.
//!
//! Hygon DCUs run HIP and RCCL, so the HIP and NCCL-family rules already
//! cover them. Moore Threads' torch_musa reports a kernel fault in CUDA's
//! words (`MUSA error: an illegal memory access was encountered`,
//! MooreThreads/torch_musa issue 105), which the CUDA rule reads; no
//! public text log of its MCCL or out-of-memory messages was found (the
//! threads show screenshots). No public log of a Cambricon (CNCL,
//! torch_mlu), MetaX or Moore Threads (MCCL) or Enflame (ECCL) failure was
//! found either, but their PyTorch bindings raise collective errors with
//! the fixed prefix PyTorch's own `NCCL error in: FILE:LINE, REASON` has,
//! from macros in their public sources (cited at each needle); those
//! prefixes are matched, and their corpus cases say they were constructed
//! from the format string. Iluvatar's IXCCL: neither a log nor a binding's
//! source was found. `docs/accelerators.md` ("Failures") says what was
//! searched.

use super::rules::re;
use regex::Regex;
use std::sync::LazyLock;

/// The device is gone: the Ascend runtime lost its heartbeat, or the
/// driver no longer finds it (vllm-project/vllm-ascend issue 8186:
/// `Device[1] lost heartbeat.`, `Device_Absent/Abnormal(EL0001): Device
/// not found or invalid.`).
pub(crate) static DEVICE_LOST: LazyLock<Regex> =
    LazyLock::new(|| re(r"\bDevice\[\d+\] lost heartbeat|Device_Absent/Abnormal\(EL0001\)"));

/// Device memory exhausted.
pub(crate) const DEVICE_OOM: &[&str] = &[
    // torch_npu (Ascend): `RuntimeError: NPU out of memory. Tried to
    // allocate 5.03 GiB (NPU 3; 60.96 GiB total capacity; …)`
    // (xingchensong/TouchNet issue 100; vllm-project/vllm-ascend issue 19).
    "NPU out of memory. Tried to allocate",
    // PaddlePaddle on Kunlunxin: `OSError: (External) XPU API return wrong
    // value[-705], no enough memory` (PaddlePaddle/Paddle issue 56395) and
    // the allocator's `Out of memory error on XPU` (Paddle PR 27974).
    "XPU API return wrong value[-705]",
    "Out of memory error on XPU",
    // torch_mlu (Cambricon): its caching allocator raises `MLU out of
    // memory. Tried to allocate …` (Cambricon/torch_mlu, the MLU caching
    // allocator's OutOfMemoryError; the format string, no log found).
    "MLU out of memory. Tried to allocate",
];

/// A collective library gave up waiting for a peer.
pub(crate) const COLLECTIVE_TIMEOUT: &[&str] = &[
    // HCCL (Ascend): `EI0006: … Getting socket times out. Reason: Remote
    // Rank did not send the data in time.` (hiyouga/LlamaFactory issue
    // 5071; vllm-project/vllm-ascend issue 486).
    "Getting socket times out",
];

/// A collective library call failed.
pub(crate) const COLLECTIVE_ERROR: &[&str] = &[
    // HCCL through torch_npu: `RuntimeError: InnerRunOpApi:… OPS function
    // error: HcclAllreduce, error code is 6` (vllm-project/vllm-ascend
    // issue 486).
    "OPS function error: Hccl",
    // BKCL (Kunlunxin): its own error lines are tagged `[ERR][BKCL]`
    // (PaddlePaddle/Paddle issue 75925).
    "[ERR][BKCL]",
    // The prefix of the collective-error macros that port PyTorch's
    // `C10D_NCCL_CHECK` (`"X error in: " + __FILE__ + ":" + __LINE__ + ", "
    // + the library's error string`), raised as a RuntimeError:
    // CNCL — Cambricon/torch_mlu,
    // torch_mlu/csrc/framework/distributed/cncl_utils.h (C10D_CNCL_CHECK);
    "CNCL error in: ",
    // MCCL — MooreThreads/torch_musa, torch_musa/csrc/distributed/MCCLUtils.h
    // (C10D_MCCL_CHECK); MetaX's MCCL binding raises the same words;
    "MCCL error in: ",
    // ECCL — Enflame, through DeepLink-org/deeplink.framework's
    // torch_dipu ECCL vendor layer (ECCL_THROW) and PaddlePaddle's
    // ProcessGroupECCL.
    "ECCL error in: ",
];
