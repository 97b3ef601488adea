//! Fitting text into terminal columns: display widths (wide characters
//! count two), names shortened in the middle so that names differing only
//! at their end stay told apart (`cloud-a-a1…use1-0003`), prose cut at its
//! end, and table column widths shared out so that wide columns give way
//! first and numbers (prices, counts) are never cut. Pure.

use std::borrow::Cow;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// The ellipsis that marks a cut.
const CUT: char = '…';

/// Display width in terminal columns.
pub fn width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

fn char_width(c: char) -> usize {
    UnicodeWidthChar::width(c).unwrap_or(0)
}

/// `s` in at most `w` columns: whole when it fits, else its start and its
/// end with `…` between them (the start gets the odd column). For names:
/// `cloud-a-a10g-ondemand-use1-0003` in 20 columns is
/// `cloud-a-a1…use1-0003`, never `cloud-a-a10g-ondema` (which
/// `…-0004` would shorten to as well).
pub fn middle(s: &str, w: usize) -> Cow<'_, str> {
    if width(s) <= w {
        return Cow::Borrowed(s);
    }
    if w == 0 {
        return Cow::Borrowed("");
    }
    let (head, tail) = split(s, w - 1, (w - 1).div_ceil(2));
    Cow::Owned(format!("{head}{CUT}{tail}"))
}

/// `s` in at most `w` columns like [`middle`], but with the cut moved
/// (the nearest to the middle first) where the middle one would leave it
/// looking like another of `among` cut the same way: names that differ in
/// their middle (`cloud-a/h100x8-ondemand`, `cloud-a/h200x8-ondemand`)
/// stay told apart too. What is shown is then the start and end of no
/// other name of `among`. When no cut tells it apart, the middle one.
pub fn distinct<'a>(s: &'a str, among: &[&str], w: usize) -> Cow<'a, str> {
    if width(s) <= w {
        return Cow::Borrowed(s);
    }
    if w == 0 {
        return Cow::Borrowed("");
    }
    // Names that fit show whole, and so never look cut.
    let others: Vec<&str> = among.iter().copied().filter(|o| *o != s && width(o) > w).collect();
    let room = w - 1;
    let mid = room.div_ceil(2);
    let like = |head: &str, tail: &str| {
        others.iter().any(|o| o.len() >= head.len() + tail.len() && o.starts_with(head) && o.ends_with(tail))
    };
    for d in 0..=room {
        for h in [mid.checked_sub(d), Some(mid + d).filter(|_| d > 0)].into_iter().flatten() {
            if h > room {
                continue;
            }
            let (head, tail) = split(s, room, h);
            if !like(head, tail) {
                return Cow::Owned(format!("{head}{CUT}{tail}"));
            }
        }
    }
    middle(s, w)
}

/// The start of `s` in up to `head_room` columns and its end in what is
/// left of `room` (a wide character that does not fit the start leaves
/// its column to the end).
fn split(s: &str, room: usize, head_room: usize) -> (&str, &str) {
    let mut head = 0;
    let mut head_end = 0;
    for (i, c) in s.char_indices() {
        let cw = char_width(c);
        if head + cw > head_room {
            break;
        }
        head += cw;
        head_end = i + c.len_utf8();
    }
    let tail_room = room - head;
    let mut tail = 0;
    let mut tail_start = s.len();
    for (i, c) in s.char_indices().rev() {
        let cw = char_width(c);
        if i < head_end || tail + cw > tail_room {
            break;
        }
        tail += cw;
        tail_start = i;
    }
    (&s[..head_end], &s[tail_start..])
}

/// `s` in at most `w` columns, cut at its end with `…`. For prose
/// (evidence, reasons), whose start says the most.
pub fn end(s: &str, w: usize) -> Cow<'_, str> {
    if width(s) <= w {
        return Cow::Borrowed(s);
    }
    if w == 0 {
        return Cow::Borrowed("");
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let cw = char_width(c);
        if used + cw + 1 > w {
            break;
        }
        out.push(c);
        used += cw;
    }
    out.push(CUT);
    Cow::Owned(out)
}

/// Display width, counted only until it passes `cap` (for long text).
pub fn width_upto(s: &str, cap: usize) -> usize {
    let mut w = 0;
    for c in s.chars() {
        w += char_width(c);
        if w > cap {
            break;
        }
    }
    w
}

/// One table column, for [`widths`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Col {
    /// The width its widest cell (or its header) needs.
    pub want: usize,
    /// It shrinks to this first, the furthest over it first.
    pub comfort: usize,
    /// It is never made narrower than this (below, the screen clips).
    pub min: usize,
    /// It may be left out when the others would shrink below comfortable
    /// (the rightmost such column first).
    pub optional: bool,
    /// It takes the room nobody needs.
    pub slack: bool,
}

impl Col {
    /// A column that is never cut (numbers, prices, states): as wide as
    /// its widest cell.
    pub fn fixed(want: usize) -> Self {
        Col { want, comfort: want, min: want, optional: false, slack: false }
    }
    /// A column that may be shortened: to `comfort` first, then to `min`.
    pub fn shrink(want: usize, comfort: usize, min: usize) -> Self {
        let min = min.min(want);
        Col { want, comfort: comfort.clamp(min, want.max(min)), min, optional: false, slack: false }
    }
    pub fn optional(self) -> Self {
        Col { optional: true, ..self }
    }
    pub fn slack(self) -> Self {
        Col { slack: true, ..self }
    }
}

/// Widths for `cols` in `avail` columns, `spacing` apart; `0` for a column
/// left out (and only then: [`shown`] drops those). Optional columns go
/// (the rightmost first) where that lets every other column show whole,
/// or while the others would not fit at their comfortable widths. With
/// room to spare, the last slack column takes it. Otherwise the column
/// furthest over its comfortable width gives one at a time (the rightmost
/// of equals) until each is comfortable, then the furthest over its
/// minimum gives, down to the minimums; below them the screen clips.
pub fn widths(cols: &[Col], avail: usize, spacing: usize) -> Vec<usize> {
    let mut shown = vec![true; cols.len()];
    let need = |shown: &[bool], width: fn(&Col) -> usize| -> usize {
        let n = shown.iter().filter(|s| **s).count();
        let gaps = n.saturating_sub(1) * spacing;
        cols.iter().zip(shown).filter(|(_, s)| **s).map(|(c, _)| width(c)).sum::<usize>() + gaps
    };
    let drop_one = |shown: &mut [bool]| -> bool {
        let Some(i) = (0..cols.len()).rev().find(|&i| shown[i] && cols[i].optional) else { return false };
        shown[i] = false;
        true
    };
    // Whole names before optional columns, where leaving those out is
    // enough for every column to show whole.
    let mut whole = shown.clone();
    while need(&whole, |c| c.want) > avail && drop_one(&mut whole) {}
    if need(&whole, |c| c.want) <= avail {
        shown = whole;
    }
    while need(&shown, |c| c.comfort) > avail && drop_one(&mut shown) {}
    let n = shown.iter().filter(|s| **s).count();
    let room = avail.saturating_sub(n.saturating_sub(1) * spacing);
    let mut w: Vec<usize> = cols.iter().zip(&shown).map(|(c, s)| if *s { c.want } else { 0 }).collect();
    let total: usize = w.iter().sum();
    if total <= room {
        if let Some(i) = (0..cols.len()).rev().find(|&i| shown[i] && cols[i].slack) {
            w[i] += room - total;
        }
        return w;
    }
    for floor in [|c: &Col| c.comfort, |c: &Col| c.min] {
        while w.iter().sum::<usize>() > room {
            let Some(i) = (0..cols.len())
                .filter(|&i| shown[i] && w[i] > floor(&cols[i]))
                .max_by_key(|&i| (w[i] - floor(&cols[i]), i))
            else {
                break;
            };
            w[i] -= 1;
        }
    }
    w
}

/// The cells (or constraints) of the columns [`widths`] kept.
pub fn shown<T>(cells: impl IntoIterator<Item = T>, widths: &[usize]) -> Vec<T> {
    cells.into_iter().zip(widths).filter(|(_, w)| **w > 0).map(|(c, _)| c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_shortened_in_the_middle() {
        assert_eq!(middle("cloud-a-a10g-ondemand-use1-0003", 20), "cloud-a-a1…use1-0003");
        assert_ne!(
            middle("cloud-a-a10g-ondemand-use1-0003", 12),
            middle("cloud-a-a10g-ondemand-use1-0004", 12)
        );
        assert_eq!(middle("ray-iad-l4-01", 12), "ray-ia…l4-01");
        assert_eq!(middle("ray-iad-l4-01", 13), "ray-iad-l4-01");
        assert_eq!(middle("abc", 1), "…");
        assert_eq!(middle("abc", 0), "");
        assert!(matches!(middle("fits", 4), Cow::Borrowed(_)));
    }

    #[test]
    fn names_that_differ_in_their_middle_are_cut_elsewhere() {
        let pools =
            ["cloud-a/h100x8-ondemand", "cloud-a/h200x8-ondemand", "cloud-a/a10g-ondemand", "cloud-a/cpu-c7"];
        let shown: Vec<String> = pools.iter().map(|p| distinct(p, &pools, 14).into_owned()).collect();
        assert_eq!(middle(pools[0], 14), middle(pools[1], 14), "the middle alone would not do");
        assert_eq!(shown, ["cloud-a/h1…and", "cloud-a/h2…and", "cloud-a/a…mand", "cloud-a/cpu-c7"]);
        // Where the middle tells them apart, it is the middle.
        let nodes = ["cloud-a-a10g-ondemand-use1-0003", "cloud-a-a10g-ondemand-use1-0004"];
        assert_eq!(distinct(nodes[0], &nodes, 20), "cloud-a-a1…use1-0003");
        // Nothing tells them apart in 3 columns: the middle.
        assert_eq!(distinct(pools[0], &pools, 3), middle(pools[0], 3));
    }

    #[test]
    fn widths_are_columns_not_chars() {
        assert_eq!(width("日本語"), 6);
        // 7 columns: 1 for `…`, 3 for the start, but its second wide
        // character would pass them: that column goes to the end.
        assert_eq!(middle("日本語のトークン", 7), "日…クン");
        assert_eq!(width(&middle("日本語のトークン", 7)), 7);
        assert_eq!(width(&middle("ab日本語のトークンcd", 9)), 9);
        assert_eq!(end("日本語のトークン", 7), "日本語…");
        assert_eq!(end("fra-h100-01", 6), "fra-h…");
        assert_eq!(end("abc", 0), "");
        assert_eq!(width_upto("日本語のトークン", 5), 6, "stops once past the cap");
    }

    #[test]
    fn columns_shrink_to_comfortable_then_to_their_minimums() {
        // The audit table's WHO, ACTION, TARGET, OUTCOME, REASON.
        let cols = |want: [usize; 5]| -> Vec<Col> {
            let (comfort, mins) = ([10, 12, 10, 18, 8], [4, 6, 6, 7, 6]);
            let mut c: Vec<Col> = (0..5).map(|i| Col::shrink(want[i], comfort[i], mins[i])).collect();
            c[4] = c[4].slack();
            c
        };
        let w = |want, avail: usize| widths(&cols(want), avail + 4, 1);
        assert_eq!(
            w([11, 12, 11, 32, 30], 100),
            [11, 12, 11, 32, 34],
            "room to spare goes to the slack column"
        );
        assert_eq!(w([11, 12, 11, 32, 30], 80), [11, 12, 11, 28, 18], "the furthest over gives first");
        assert_eq!(w([18, 12, 11, 32, 30], 59), [11, 12, 10, 18, 8]);
        assert_eq!(w([11, 12, 11, 32, 30], 40), [7, 8, 8, 9, 8], "then the furthest over its minimum");
        assert_eq!(w([11, 12, 11, 32, 30], 10), [4, 6, 6, 7, 6], "the minimums, then the screen clips");
    }

    #[test]
    fn fixed_columns_never_give_and_optional_ones_go_first() {
        let cols = [Col::fixed(5), Col::shrink(30, 12, 6), Col::fixed(6), Col::fixed(12).optional()];
        assert_eq!(widths(&cols, 60, 1), [5, 30, 6, 12]);
        assert_eq!(widths(&cols, 45, 1), [5, 30, 6, 0], "the optional column goes where the name then fits");
        assert_eq!(widths(&cols, 40, 1), [5, 14, 6, 12], "the name shrinks to comfortable first");
        assert_eq!(widths(&cols, 30, 1), [5, 17, 6, 0], "then the optional column goes");
        assert_eq!(widths(&cols, 20, 1), [5, 7, 6, 0], "prices keep their width");
    }
}
