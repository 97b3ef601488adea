//! A reader of server-sent events (the `text/event-stream` format) over a
//! stream of byte chunks.

/// One event as the server sent it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// `message` when the server named none.
    pub event: String,
    pub id: Option<String>,
    pub data: String,
}

/// Collects chunks and hands out whole events.
#[derive(Debug, Default)]
pub struct SseReader {
    buf: Vec<u8>,
}

/// The most one event may take before it is refused (a broken server).
const MAX_EVENT: usize = 64 << 20;

impl SseReader {
    /// Adds a chunk; returns the events it completed. An `Err` means the
    /// stream is not one.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, String> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        loop {
            let end = find_blank_line(&self.buf);
            let Some((at, len)) = end else { break };
            let block: Vec<u8> = self.buf.drain(..at + len).collect();
            let text = String::from_utf8_lossy(&block[..at]);
            let mut ev = SseEvent { event: "message".into(), ..SseEvent::default() };
            let mut data = Vec::new();
            for line in text.lines() {
                if line.starts_with(':') {
                    continue;
                }
                let (field, value) =
                    line.split_once(':').map_or((line, ""), |(f, v)| (f, v.strip_prefix(' ').unwrap_or(v)));
                match field {
                    "event" => ev.event = value.to_string(),
                    "id" => ev.id = Some(value.to_string()),
                    "data" => data.push(value.to_string()),
                    _ => {}
                }
            }
            if data.is_empty() && ev.id.is_none() {
                continue; // a keep-alive comment
            }
            ev.data = data.join("\n");
            out.push(ev);
        }
        if self.buf.len() > MAX_EVENT {
            return Err("an event from the server is over 64 MiB".into());
        }
        Ok(out)
    }
}

/// Where the first blank line ends an event: its offset and the length of
/// the separator.
fn find_blank_line(b: &[u8]) -> Option<(usize, usize)> {
    (0..b.len()).find_map(|i| {
        if b[i..].starts_with(b"\n\n") {
            Some((i, 2))
        } else if b[i..].starts_with(b"\r\n\r\n") {
            Some((i, 4))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_come_out_whole() {
        let mut r = SseReader::default();
        assert!(r.push(b"event: batch\nid: s:1\nda").unwrap().is_empty());
        let evs = r.push(b"ta: {\"a\":1}\n\n: keep-alive\n\nevent: status\ndata: x\ndata: y\n\n").unwrap();
        assert_eq!(evs.len(), 2);
        assert_eq!(
            (evs[0].event.as_str(), evs[0].id.as_deref(), evs[0].data.as_str()),
            ("batch", Some("s:1"), "{\"a\":1}")
        );
        assert_eq!(evs[1].data, "x\ny");
    }
}
