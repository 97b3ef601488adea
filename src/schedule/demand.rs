//! What the work the engine knows asks for, by width: the GPUs each live
//! workload (waiting or running) takes on one node, weighted by all the
//! GPUs it takes. The fit factor reads it to tell a placement that
//! strands GPUs some work could have used from one that strands nothing.
//!
//! Keeping a node whole is worth something only to work wider than the
//! request at hand that could run on that node: leaving one GPU free on a
//! two-GPU node strands nothing when no work asks for two GPUs on a node,
//! and leaving seven free on an eight-GPU node strands the eight-GPU
//! slot only as far as eight-GPU work is part of the mix. That is the
//! idea of Alibaba's fragmentation gradient descent (Weng et al., ATC
//! '23), which scores a placement by how much of the node it leaves
//! unusable to the workload's own distribution of sizes, taken here in
//! the form the fit factor can use without giving up its order
//! ([`DemandMix::stranding`]).

/// GPU-weighted counts of live work by per-node width. Empty: nothing
/// known, and the fit factor counts every GPU a placement leaves free as
/// stranded (as it did before the mix existed, and as tools that place
/// one spec with no engine behind them still do).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DemandMix {
    /// GPUs of live work whose per-node width is the index.
    gpus_by_width: Vec<u64>,
}

/// Widths past this are counted as this wide: no node holds more GPUs.
const MAX_WIDTH: usize = 1024;

impl DemandMix {
    /// Counts one workload of `nodes` nodes with `gpus_per_node` each.
    /// Work without GPUs is not part of the mix.
    pub fn add(&mut self, gpus_per_node: u32, nodes: u32) {
        if gpus_per_node == 0 {
            return;
        }
        let w = (gpus_per_node as usize).min(MAX_WIDTH);
        if self.gpus_by_width.len() <= w {
            self.gpus_by_width.resize(w + 1, 0);
        }
        self.gpus_by_width[w] += u64::from(gpus_per_node) * u64::from(nodes.max(1));
    }

    /// Forgets one workload counted by [`DemandMix::add`] with the same
    /// figures.
    pub fn remove(&mut self, gpus_per_node: u32, nodes: u32) {
        if gpus_per_node == 0 {
            return;
        }
        let w = (gpus_per_node as usize).min(MAX_WIDTH);
        if let Some(n) = self.gpus_by_width.get_mut(w) {
            *n = n.saturating_sub(u64::from(gpus_per_node) * u64::from(nodes.max(1)));
        }
        while self.gpus_by_width.last() == Some(&0) {
            self.gpus_by_width.pop();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.gpus_by_width.is_empty()
    }

    /// This mix with one more workload: what the engine's own mix would
    /// be while it places `gpus_per_node` × `nodes` (a plan of a spec not
    /// yet submitted).
    pub fn with(&self, gpus_per_node: u32, nodes: u32) -> Self {
        let mut m = self.clone();
        m.add(gpus_per_node, nodes);
        m
    }

    /// The share of the mix's GPUs in work wider than `width` that a node
    /// of `node_gpus` GPUs could host: what a placement of `width` GPUs
    /// per node strands of each GPU it leaves free there. 1 when the mix
    /// is empty (nothing known: every GPU left free may be needed whole).
    pub fn stranding(&self, width: u32, node_gpus: u32) -> f64 {
        Stranding::of(self).share(width, node_gpus)
    }
}

/// [`DemandMix::stranding`] for many node sizes: the mix's cumulative
/// counts, taken once per decision.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stranding {
    /// GPUs of work at most as wide as the index, cumulative.
    at_most: Vec<u64>,
}

impl Stranding {
    pub(crate) fn of(mix: &DemandMix) -> Self {
        let mut sum = 0u64;
        let at_most = mix
            .gpus_by_width
            .iter()
            .map(|n| {
                sum += n;
                sum
            })
            .collect();
        Self { at_most }
    }

    fn upto(&self, width: u32) -> u64 {
        match self.at_most.len() {
            0 => 0,
            len => self.at_most[(width as usize).min(len - 1)],
        }
    }

    /// See [`DemandMix::stranding`].
    #[inline]
    pub(crate) fn share(&self, width: u32, node_gpus: u32) -> f64 {
        let total = self.at_most.last().copied().unwrap_or(0);
        if total == 0 {
            return 1.0;
        }
        if node_gpus <= width {
            return 0.0;
        }
        (self.upto(node_gpus) - self.upto(width)) as f64 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_mix_strands_every_free_gpu() {
        assert_eq!(DemandMix::default().stranding(1, 8), 1.0);
    }

    /// Alibaba's mix: one-GPU work and a little eight-GPU work. A GPU left
    /// free on a two-GPU node strands nothing; on an eight-GPU node, the
    /// eight-GPU work's share.
    #[test]
    fn only_wider_work_that_fits_the_node_counts() {
        let mut mix = DemandMix::default();
        for _ in 0..92 {
            mix.add(1, 1);
        }
        mix.add(8, 1);
        assert_eq!(mix.stranding(1, 2), 0.0);
        assert_eq!(mix.stranding(1, 1), 0.0);
        assert!((mix.stranding(1, 8) - 0.08).abs() < 1e-12);
        assert_eq!(mix.stranding(8, 8), 0.0);
        // A two-node gang of 4 per node counts 8 GPUs at width 4.
        mix.add(4, 2);
        assert!((mix.stranding(1, 4) - 8.0 / 108.0).abs() < 1e-12);
        mix.remove(4, 2);
        mix.remove(8, 1);
        assert_eq!(mix.stranding(1, 8), 0.0);
        for _ in 0..92 {
            mix.remove(1, 1);
        }
        assert!(mix.is_empty(), "{mix:?}");
        assert_eq!(mix.stranding(1, 8), 1.0);
    }
}
