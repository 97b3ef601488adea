//! Container images on owners' hosts: what a pool of hosts offers image
//! workloads, from its hosts' probes, and the launch-time refusal on a host
//! whose last probe found no working container engine.
//!
//! The container itself is the local provider's: `canopy __host` runs a
//! [`crate::providers::local::LocalProvider`] as the owner's user, which
//! detects the owner's podman (or docker) with `<engine> info` at each
//! probe and launch and builds the same `run`/`stop` command lines
//! (`local/container.rs`): the token label for re-adoption, `stop --time`
//! for `stop_grace`, logs and outputs under the attempt directory. The
//! image must be on the host or pullable by the owner's engine; one that is
//! neither fails as class `image` there. Nothing here does I/O.

use super::protocol::Probe;
use crate::fleet::{CONTAINER_MEMORY_UNENFORCED_TAG, CONTAINER_TAG};

/// The container tags of a pool from the probes of its hosts that
/// answered: [`CONTAINER_TAG`] when every one of them runs images (a pool
/// is one shape: placement may pick any of its hosts), and
/// [`CONTAINER_MEMORY_UNENFORCED_TAG`] when any of them cannot hold a
/// container to its memory limit. None without an answering host.
pub(super) fn pool_tags<'a>(probes: impl IntoIterator<Item = &'a Probe>) -> Vec<String> {
    let (mut answered, mut all_run, mut any_unenforced) = (0, true, false);
    for p in probes {
        answered += 1;
        all_run &= p.containers.iter().any(|t| t == CONTAINER_TAG);
        any_unenforced |= p.containers.iter().any(|t| t == CONTAINER_MEMORY_UNENFORCED_TAG);
    }
    let mut tags = Vec::new();
    if answered > 0 && all_run {
        tags.push(CONTAINER_TAG.to_string());
        if any_unenforced {
            tags.push(CONTAINER_MEMORY_UNENFORCED_TAG.to_string());
        }
    }
    tags
}

/// Why an image cannot be launched on `host`, whose last probe is `probe`
/// (`None`: it has not answered one): its owner's container engine did not
/// answer `info` then. Placement keeps images off such hosts; this is the
/// second line of defence, never a bare run of the command.
pub(super) fn refuse_image(host: &str, image: &str, probe: Option<&Probe>) -> Option<String> {
    let runs = probe.is_some_and(|p| p.containers.iter().any(|t| t == CONTAINER_TAG));
    (!runs).then(|| {
        format!(
            "ssh host {host} has no working container engine for {image:?}: its owner's podman (or docker) \
             did not answer `info` at the last probe; install and configure it for the owner's user, \
             or remove runtime.image"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::Shape;

    fn shape() -> Shape {
        Shape {
            accelerator: None,
            gpus_per_node: 0,
            interconnect: crate::accel::Interconnect::Pcie,
            cpu_cores: 8.0,
            memory_gb: 32.0,
            disk_gb: 100.0,
            fabric: None,
        }
    }

    fn probe(tags: &[&str]) -> Probe {
        Probe {
            arch: "x86_64".into(),
            shape: shape(),
            now_ms: 0,
            containers: tags.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn a_pool_runs_images_only_when_every_answering_host_does() {
        let with = probe(&[CONTAINER_TAG]);
        let without = probe(&[]);
        let rootless_v1 = probe(&[CONTAINER_TAG, CONTAINER_MEMORY_UNENFORCED_TAG]);
        assert_eq!(pool_tags([&with, &with]), [CONTAINER_TAG]);
        assert!(pool_tags([&with, &without]).is_empty());
        assert!(pool_tags(std::iter::empty::<&Probe>()).is_empty());
        assert_eq!(pool_tags([&with, &rootless_v1]), [CONTAINER_TAG, CONTAINER_MEMORY_UNENFORCED_TAG]);
        // A probe from an older host binary has no `containers`: no images.
        let old: Probe = serde_json::from_value(serde_json::json!({
            "arch": "x86_64", "shape": shape(), "now_ms": 0
        }))
        .unwrap();
        assert!(pool_tags([&old]).is_empty());
    }

    #[test]
    fn an_image_is_refused_on_a_host_without_an_engine_and_says_what_to_do() {
        let m = refuse_image("owner-a", "localhost/x:1", Some(&probe(&[]))).unwrap();
        assert!(m.contains("owner-a") && m.contains("no working container engine"), "{m}");
        assert!(m.contains("remove runtime.image"), "{m}");
        assert!(refuse_image("owner-a", "localhost/x:1", None).is_some());
        assert_eq!(refuse_image("owner-a", "localhost/x:1", Some(&probe(&[CONTAINER_TAG]))), None);
    }
}
