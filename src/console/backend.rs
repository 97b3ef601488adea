//! The terminal backend: crossterm's, except that colours go out at the
//! depth `--color` chose.
//!
//! crossterm writes every named and indexed colour as a 256-colour code
//! (`38;5;N`) and every RGB colour as a truecolor one, whatever the
//! terminal shows; and under `NO_COLOR` it writes `ESC[;m` (reset all),
//! which cancels reverse video (see the console reference, gotcha 9). So
//! this backend writes each cell's colours and modifiers itself, as plain
//! SGR codes of one depth:
//!
//! - 16: `30–37`/`90–97` (backgrounds `40–47`/`100–107`), so the user's
//!   palette applies;
//! - 256: `38;5;N`/`48;5;N`;
//! - truecolor: `38;2;R;G;B`/`48;2;R;G;B` (named colours as xterm's
//!   default palette);
//! - none: no colour codes at all, only modifiers.
//!
//! Everything else (cursor, clearing, size) is crossterm's.

use super::theme::{ColorDepth, to_16, to_256};
use ratatui::backend::{Backend, ClearType, CrosstermBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::crossterm::cursor::MoveTo;
use ratatui::crossterm::queue;
use ratatui::layout::{Position, Size};
use ratatui::style::{Color, Modifier};
use std::io::{self, Write};

/// xterm's default palette for the 16 ANSI colours, in ratatui's order
/// (black, red, green, yellow, blue, magenta, cyan, gray, dark gray, light
/// red, …, white): what named colours become at truecolor, and what
/// contrast checks assume a terminal shows for them.
pub const ANSI_RGB: [(u8, u8, u8); 16] = [
    (0, 0, 0),
    (205, 0, 0),
    (0, 205, 0),
    (205, 205, 0),
    (0, 0, 238),
    (205, 0, 205),
    (0, 205, 205),
    (229, 229, 229),
    (127, 127, 127),
    (255, 0, 0),
    (0, 255, 0),
    (255, 255, 0),
    (92, 92, 255),
    (255, 0, 255),
    (0, 255, 255),
    (255, 255, 255),
];

const NAMED: [Color; 16] = [
    Color::Black,
    Color::Red,
    Color::Green,
    Color::Yellow,
    Color::Blue,
    Color::Magenta,
    Color::Cyan,
    Color::Gray,
    Color::DarkGray,
    Color::LightRed,
    Color::LightGreen,
    Color::LightYellow,
    Color::LightBlue,
    Color::LightMagenta,
    Color::LightCyan,
    Color::White,
];

/// A named colour's ANSI number (0–15).
fn ansi_index(c: Color) -> Option<u8> {
    NAMED.iter().position(|n| *n == c).map(|i| i as u8)
}

/// The colour as RGB, named and indexed ones as xterm shows them by
/// default; `None` for the terminal's default colour.
pub fn rgb(c: Color) -> Option<(u8, u8, u8)> {
    match c {
        Color::Reset => None,
        Color::Rgb(r, g, b) => Some((r, g, b)),
        Color::Indexed(i) => Some(indexed_rgb(i)),
        named => ansi_index(named).map(|i| ANSI_RGB[usize::from(i)]),
    }
}

/// xterm's colour for a 256-colour index.
fn indexed_rgb(i: u8) -> (u8, u8, u8) {
    const LEVELS: [u8; 6] = [0, 95, 135, 175, 215, 255];
    match i {
        0..16 => ANSI_RGB[usize::from(i)],
        16..232 => {
            let n = i - 16;
            (LEVELS[usize::from(n / 36)], LEVELS[usize::from(n / 6 % 6)], LEVELS[usize::from(n % 6)])
        }
        _ => {
            let v = 8 + 10 * (i - 232);
            (v, v, v)
        }
    }
}

/// The colour a terminal of `depth` is sent for `c`: one of the 16 named
/// colours, an [`Color::Indexed`] or a [`Color::Rgb`] (or
/// [`Color::Reset`], at any depth). At [`ColorDepth::None`], `Reset`.
pub fn at_depth(c: Color, depth: ColorDepth) -> Color {
    if c == Color::Reset {
        return c;
    }
    match depth {
        ColorDepth::None => Color::Reset,
        ColorDepth::Ansi16 => match c {
            Color::Indexed(i) if i < 16 => NAMED[usize::from(i)],
            Color::Indexed(_) | Color::Rgb(..) => rgb(c).map_or(Color::Reset, |(r, g, b)| to_16(r, g, b)),
            named => named,
        },
        ColorDepth::Ansi256 => match c {
            Color::Indexed(_) => c,
            Color::Rgb(r, g, b) => Color::Indexed(to_256(r, g, b)),
            named => ansi_index(named).map_or(Color::Reset, Color::Indexed),
        },
        ColorDepth::TrueColor => rgb(c).map_or(Color::Reset, |(r, g, b)| Color::Rgb(r, g, b)),
    }
}

/// Which colour an SGR code sets.
#[derive(Clone, Copy)]
enum Layer {
    Fg,
    Bg,
    Underline,
}

/// The SGR parameters for `c` (already [`at_depth`]) on `layer`; empty
/// when that layer cannot take it (underline colour in 16 colours).
fn sgr(c: Color, layer: Layer) -> String {
    let (reset, base, bright, ext) = match layer {
        Layer::Fg => (39, 30, 90, 38),
        Layer::Bg => (49, 40, 100, 48),
        Layer::Underline => (59, 0, 0, 58),
    };
    match c {
        Color::Reset => reset.to_string(),
        Color::Indexed(i) => format!("{ext};5;{i}"),
        Color::Rgb(r, g, b) => format!("{ext};2;{r};{g};{b}"),
        named => match (layer, ansi_index(named)) {
            (Layer::Underline, _) | (_, None) => String::new(),
            (_, Some(i @ 0..8)) => (base + u16::from(i)).to_string(),
            (_, Some(i)) => (bright + u16::from(i) - 8).to_string(),
        },
    }
}

/// The SGR parameters that turn modifiers `from` into `to`.
fn modifier_codes(from: Modifier, to: Modifier) -> Vec<u8> {
    const ON: [(Modifier, u8); 9] = [
        (Modifier::BOLD, 1),
        (Modifier::DIM, 2),
        (Modifier::ITALIC, 3),
        (Modifier::UNDERLINED, 4),
        (Modifier::SLOW_BLINK, 5),
        (Modifier::RAPID_BLINK, 6),
        (Modifier::REVERSED, 7),
        (Modifier::HIDDEN, 8),
        (Modifier::CROSSED_OUT, 9),
    ];
    // Each off code and the modifiers it turns off.
    const OFF: [(Modifier, u8); 7] = [
        (Modifier::BOLD.union(Modifier::DIM), 22),
        (Modifier::ITALIC, 23),
        (Modifier::UNDERLINED, 24),
        (Modifier::SLOW_BLINK.union(Modifier::RAPID_BLINK), 25),
        (Modifier::REVERSED, 27),
        (Modifier::HIDDEN, 28),
        (Modifier::CROSSED_OUT, 29),
    ];
    let removed = from - to;
    let mut add = to - from;
    let mut codes = Vec::new();
    for (m, code) in OFF {
        if removed.intersects(m) {
            codes.push(code);
            // The code also turned off the ones that stay (bold and dim).
            add |= to & m;
        }
    }
    codes.extend(ON.iter().filter(|(m, _)| add.contains(*m)).map(|(_, c)| c));
    codes
}

/// crossterm's backend, with colours at one depth (see the module).
#[derive(Debug)]
pub struct DepthBackend<W: Write> {
    inner: CrosstermBackend<W>,
    depth: ColorDepth,
}

impl<W: Write> DepthBackend<W> {
    pub fn new(writer: W, depth: ColorDepth) -> Self {
        DepthBackend { inner: CrosstermBackend::new(writer), depth }
    }

    pub fn depth(&self) -> ColorDepth {
        self.depth
    }
}

impl<W: Write> Backend for DepthBackend<W> {
    type Error = io::Error;

    fn draw<'a, I>(&mut self, content: I) -> io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        let colour = self.depth != ColorDepth::None;
        let w = &mut self.inner;
        let (mut fg, mut bg, mut ul) = (Color::Reset, Color::Reset, Color::Reset);
        let mut modifier = Modifier::empty();
        let mut last: Option<(u16, u16)> = None;
        for (x, y, cell) in content {
            if !matches!(last, Some((lx, ly)) if ly == y && lx.checked_add(1) == Some(x)) {
                queue!(w, MoveTo(x, y))?;
            }
            last = Some((x, y));
            let mut params: Vec<String> = Vec::new();
            if cell.modifier != modifier {
                params.extend(modifier_codes(modifier, cell.modifier).iter().map(u8::to_string));
                modifier = cell.modifier;
            }
            if colour {
                let (f, b) = (at_depth(cell.fg, self.depth), at_depth(cell.bg, self.depth));
                if f != fg {
                    params.push(sgr(f, Layer::Fg));
                    fg = f;
                }
                if b != bg {
                    params.push(sgr(b, Layer::Bg));
                    bg = b;
                }
                let u = at_depth(cell.underline_color, self.depth);
                if u != ul {
                    params.push(sgr(u, Layer::Underline));
                    ul = u;
                }
            }
            params.retain(|p| !p.is_empty());
            if !params.is_empty() {
                write!(w, "\x1b[{}m", params.join(";"))?;
            }
            w.write_all(cell.symbol().as_bytes())?;
        }
        // Reset all: colours and modifiers (a plain `0`, no colour code).
        w.write_all(b"\x1b[0m")
    }

    fn append_lines(&mut self, n: u16) -> io::Result<()> {
        self.inner.append_lines(n)
    }

    fn hide_cursor(&mut self) -> io::Result<()> {
        self.inner.hide_cursor()
    }

    fn show_cursor(&mut self) -> io::Result<()> {
        self.inner.show_cursor()
    }

    fn get_cursor_position(&mut self) -> io::Result<Position> {
        self.inner.get_cursor_position()
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> io::Result<()> {
        self.inner.set_cursor_position(position)
    }

    fn clear(&mut self) -> io::Result<()> {
        self.inner.clear()
    }

    fn clear_region(&mut self, clear_type: ClearType) -> io::Result<()> {
        self.inner.clear_region(clear_type)
    }

    fn size(&self) -> io::Result<Size> {
        self.inner.size()
    }

    fn window_size(&mut self) -> io::Result<WindowSize> {
        self.inner.window_size()
    }

    fn flush(&mut self) -> io::Result<()> {
        Backend::flush(&mut self.inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_colours_are_classic_sgr_at_16() {
        assert_eq!(sgr(at_depth(Color::Red, ColorDepth::Ansi16), Layer::Fg), "31");
        assert_eq!(sgr(at_depth(Color::LightCyan, ColorDepth::Ansi16), Layer::Fg), "96");
        assert_eq!(sgr(at_depth(Color::DarkGray, ColorDepth::Ansi16), Layer::Bg), "100");
        assert_eq!(sgr(at_depth(Color::Indexed(4), ColorDepth::Ansi16), Layer::Bg), "44");
        assert_eq!(at_depth(Color::Rgb(0, 122, 0), ColorDepth::Ansi16), Color::Green);
        assert_eq!(sgr(at_depth(Color::Red, ColorDepth::Ansi16), Layer::Underline), "");
    }

    #[test]
    fn each_depth_has_its_own_codes() {
        assert_eq!(sgr(at_depth(Color::Cyan, ColorDepth::Ansi256), Layer::Fg), "38;5;6");
        assert_eq!(sgr(at_depth(Color::Rgb(0, 135, 0), ColorDepth::Ansi256), Layer::Fg), "38;5;28");
        assert_eq!(sgr(at_depth(Color::Cyan, ColorDepth::TrueColor), Layer::Fg), "38;2;0;205;205");
        assert_eq!(sgr(at_depth(Color::Indexed(232), ColorDepth::TrueColor), Layer::Bg), "48;2;8;8;8");
        assert_eq!(at_depth(Color::Red, ColorDepth::None), Color::Reset);
        for d in [ColorDepth::TrueColor, ColorDepth::Ansi256, ColorDepth::Ansi16] {
            assert_eq!(sgr(at_depth(Color::Reset, d), Layer::Fg), "39");
        }
    }

    #[test]
    fn indexed_colours_are_xterms() {
        assert_eq!(indexed_rgb(16), (0, 0, 0));
        assert_eq!(indexed_rgb(196), (255, 0, 0));
        assert_eq!(indexed_rgb(255), (238, 238, 238));
    }

    #[test]
    fn turning_off_bold_keeps_dim() {
        assert_eq!(modifier_codes(Modifier::empty(), Modifier::REVERSED | Modifier::BOLD), vec![1, 7]);
        assert_eq!(modifier_codes(Modifier::BOLD | Modifier::DIM, Modifier::DIM), vec![22, 2]);
        assert_eq!(modifier_codes(Modifier::REVERSED | Modifier::BOLD, Modifier::empty()), vec![22, 27]);
    }
}
