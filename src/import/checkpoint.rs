//! A bucket or volume mounted where checkpoints go (SkyPilot `file_mounts`
//! in `MOUNT` mode, dstack `volumes`) → the spec's `[checkpoint]`.
//!
//! Canopy does not mount buckets or volumes: it keeps a workload's
//! checkpoints in its own store and hands the newest complete one to the
//! next attempt at `$CANOPY_CHECKPOINT_DIR` (mounted at `[checkpoint]
//! path` in a container). What that loses (the bucket itself, what it
//! already holds, the checkpoints outliving the workload) is one warning
//! at the mount's line, with what to do instead.

use super::Cx;
use super::yaml::Pos;
use crate::spec::Checkpoint;

/// Whether `path` is clearly where checkpoints go: absolute, with a
/// component that names them (`/checkpoints`, `/data/ckpt`,
/// `/mnt/model-checkpoints`).
pub(crate) fn is_checkpoint_path(path: &str) -> bool {
    path.starts_with('/')
        && path.split('/').any(|c| {
            let c = c.to_ascii_lowercase();
            c.contains("checkpoint") || c.contains("ckpt")
        })
}

impl Cx<'_> {
    /// `[checkpoint] path = mount`, from `what` (``bucket `x` ``, ``volume
    /// `y` ``) that source field `path` mounts at `mount`. A second one is
    /// dropped with a warning: a workload has one checkpoint directory.
    pub(crate) fn checkpoint(&mut self, mount: &str, what: &str, pos: Pos, path: &str) {
        if let Some(ck) = &self.spec.checkpoint {
            let why = format!(
                "a workload has one checkpoint directory, already `{}`; {what} is not mounted",
                ck.path
            );
            self.dropped(pos, path, &why);
            return;
        }
        self.spec.checkpoint = Some(Checkpoint {
            path: mount.to_string(),
            keep: Default::default(),
            interval: None,
            max_gb: None,
        });
        self.from("checkpoint.path", pos);
        self.warn(
            pos,
            path,
            format!(
                "`{path}` mounts {what} at `{mount}`: it becomes `[checkpoint] path = \"{mount}\"`, but Canopy \
                 does not mount {what}: it keeps the checkpoints in its own store, for this workload only, and \
                 gives the next attempt the newest complete one at $CANOPY_CHECKPOINT_DIR (`{mount}` in a \
                 container). Save each checkpoint as a directory there with a `COMPLETE` file written last; \
                 to resume from what {what} already holds, or to keep checkpoints there, copy them in or out \
                 in the commands"
            ),
        );
    }
}
