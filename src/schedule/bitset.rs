//! [`PoolSet`]: a fixed-size bitset over pool indices, so categorical
//! requirements become set intersections before any per-pool work (Slurm's
//! feasibility bitmaps). Owns nothing but bits.

/// A set of pool indices `0..len`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PoolSet {
    words: Vec<u64>,
}

impl PoolSet {
    pub fn empty(len: usize) -> Self {
        Self { words: vec![0; len.div_ceil(64)] }
    }

    /// Every index below `len`.
    pub fn full(len: usize) -> Self {
        let mut s = Self { words: vec![u64::MAX; len.div_ceil(64)] };
        let tail = len % 64;
        if tail != 0
            && let Some(last) = s.words.last_mut()
        {
            *last = (1u64 << tail) - 1;
        }
        s
    }

    pub fn insert(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }

    pub fn remove(&mut self, i: usize) {
        self.words[i / 64] &= !(1 << (i % 64));
    }

    pub fn contains(&self, i: usize) -> bool {
        self.words.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    pub fn union_with(&mut self, other: &PoolSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    /// Removes from `self` every index not in `keep`, calling `out` for
    /// each one removed, in ascending order.
    pub fn retain_in(&mut self, keep: &PoolSet, out: impl FnMut(usize)) {
        self.sift(keep, false, out);
    }

    /// Removes from `self` every index in `drop`, calling `out` for each
    /// one removed, in ascending order.
    pub fn remove_all(&mut self, drop: &PoolSet, out: impl FnMut(usize)) {
        self.sift(drop, true, out);
    }

    fn sift(&mut self, other: &PoolSet, invert: bool, mut out: impl FnMut(usize)) {
        for (wi, w) in self.words.iter_mut().enumerate() {
            let o = other.words.get(wi).copied().unwrap_or(0);
            let keep = if invert { !o } else { o };
            let mut gone = *w & !keep;
            *w &= keep;
            while gone != 0 {
                out(wi * 64 + gone.trailing_zeros() as usize);
                gone &= gone - 1;
            }
        }
    }

    /// Calls `f` with each index, ascending.
    #[inline]
    pub fn for_each(&self, mut f: impl FnMut(usize)) {
        for (wi, &w) in self.words.iter().enumerate() {
            let mut w = w;
            while w != 0 {
                f(wi * 64 + w.trailing_zeros() as usize);
                w &= w - 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(s: &PoolSet) -> Vec<usize> {
        let mut v = Vec::new();
        s.for_each(|i| v.push(i));
        v
    }

    #[test]
    fn sets_behave_like_sets() {
        let mut a = PoolSet::full(70);
        assert_eq!(members(&a), (0..70).collect::<Vec<_>>());
        let mut odd = PoolSet::empty(70);
        for i in (1..70).step_by(2) {
            odd.insert(i);
        }
        let mut removed = Vec::new();
        a.retain_in(&odd, |i| removed.push(i));
        assert_eq!(removed, (0..70).step_by(2).collect::<Vec<_>>());
        assert!(a.contains(69) && !a.contains(68) && !a.contains(70));
        let mut gone = 0;
        a.remove_all(&odd, |_| gone += 1);
        assert_eq!(gone, 35);
        assert!(members(&a).is_empty());
        a.insert(3);
        a.remove(3);
        assert!(members(&a).is_empty());
        assert!(members(&PoolSet::full(0)).is_empty());
        assert_eq!(members(&PoolSet::full(64)).len(), 64);
        let mut u = PoolSet::empty(70);
        u.union_with(&odd);
        assert_eq!(u, odd);
    }
}
