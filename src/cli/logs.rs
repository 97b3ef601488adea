//! `canopy logs`: an attempt's bytes as the workload wrote them when they
//! go to a pipe or a file, or with `--raw`; on a terminal, made safe first
//! ([`LogText`]), so a workload cannot drive the operator's terminal.
//!
//! With `--follow` it polls until the attempt has ended and nothing more
//! came. When the server goes away meanwhile (an engine restart, a
//! network cut) it says so once on stderr, tries again with the console's
//! backoff ([`Backoff`]: 200 ms doubling to 2 s) and, once the server is
//! back, resumes from the byte offsets it had printed up to: nothing twice,
//! nothing left out. It gives up (exit 4) after `--reconnect-for` (5 min by
//! default) without an answer.

use super::StoreArgs;
use super::workloads::with_api;
use canopy::client::{Backoff, Client, ClientError};
use canopy::engine::handle::Stream;
use canopy::engine::model::{AttemptId, WorkloadId};
use canopy::text::LogText;
use color_eyre::eyre::Result;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How long `--follow` waits for a server that went away, by default.
pub const RECONNECT_FOR: &str = "5m";

/// What `canopy logs` was asked.
#[derive(Debug, Clone)]
pub struct LogsArgs {
    pub id: WorkloadId,
    pub attempt: Option<u32>,
    pub follow: bool,
    pub stream: String,
    pub raw: bool,
    pub reconnect_for: Duration,
}

/// One followed attempt: its streams and how far each has been printed.
pub(super) struct Follow {
    pub(super) attempt: AttemptId,
    streams: Vec<Stream>,
    offsets: Vec<u64>,
    // One per stream: a chunk may end inside a character or a `\r\n`.
    text: Vec<LogText>,
    raw: bool,
}

impl Follow {
    /// Follows `attempt`'s stdout and stderr from their start, made safe
    /// for a terminal unless `raw`.
    pub(super) fn both(attempt: AttemptId, raw: bool) -> Follow {
        Follow {
            attempt,
            streams: vec![Stream::Stdout, Stream::Stderr],
            offsets: vec![0; 2],
            text: vec![LogText::default(), LogText::default()],
            raw,
        }
    }

    /// Prints whatever the streams gained since the last call; whether
    /// they gained anything. An offset moves on only once its bytes are
    /// printed, so a call cut off half way is taken up where it stopped.
    pub(super) async fn print_new(&mut self, c: &Client) -> Result<bool, ClientError> {
        let mut grew = false;
        for (i, s) in self.streams.iter().enumerate() {
            loop {
                let chunk = c.log_bytes(self.attempt, *s, self.offsets[i], 1 << 20).await?;
                if chunk.data.is_empty() {
                    break;
                }
                grew = true;
                self.offsets[i] = chunk.next_offset;
                if self.raw {
                    super::out::bytes(&chunk.data);
                } else {
                    super::out::stdout(&self.text[i].push(&chunk.data));
                }
            }
        }
        Ok(grew)
    }

    /// Whether the attempt has ended.
    async fn ended(&self, c: &Client) -> Result<bool, ClientError> {
        let v = c.workload(self.attempt.workload).await?;
        Ok(v.attempts.iter().find(|x| x.id.n == self.attempt.n).is_some_and(|x| x.state.is_final()))
    }

    pub(super) fn finish(&mut self) {
        for t in &mut self.text {
            super::out::stdout(&t.finish());
        }
    }
}

/// A server that stopped answering while an attempt was followed.
struct Outage {
    since: Instant,
    backoff: Backoff,
}

pub fn logs(store: &StoreArgs, a: LogsArgs) -> Result<ExitCode> {
    use std::io::IsTerminal;
    let raw = canopy::text::logs_raw(a.raw, std::io::stdout().is_terminal());
    let streams: Vec<Stream> = match a.stream.as_str() {
        "stdout" => vec![Stream::Stdout],
        "stderr" => vec![Stream::Stderr],
        _ => vec![Stream::Stdout, Stream::Stderr],
    };
    let id = a.id;
    let outcome = with_api(store, async |c| {
        let v = c.workload(id).await?;
        let n = match a.attempt {
            Some(n) => n,
            None if v.workload.attempts == 0 => return Ok(Some(v.workload.state)),
            None => v.workload.attempts,
        };
        let mut f = Follow {
            attempt: AttemptId { workload: id, n },
            offsets: vec![0; streams.len()],
            text: streams.iter().map(|_| LogText::default()).collect(),
            streams,
            raw,
        };
        if !a.follow {
            f.print_new(&c).await?;
            f.finish();
            return Ok(None);
        }
        let mut outage: Option<Outage> = None;
        loop {
            let step = async {
                let grew = f.print_new(&c).await?;
                Ok::<_, ClientError>(grew || !f.ended(&c).await?)
            };
            match step.await {
                Ok(go_on) => {
                    if let Some(o) = outage.take() {
                        errln!(
                            "canopy logs: reconnected to {} after {:.1} s; following {} on",
                            c.target(),
                            o.since.elapsed().as_secs_f64(),
                            f.attempt
                        );
                    }
                    if !go_on {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) if e.is_transient() => {
                    let o = outage.get_or_insert_with(|| {
                        errln!(
                            "canopy logs: lost the server ({e}); reconnecting for up to {}",
                            canopy::units::HumanDuration(a.reconnect_for)
                        );
                        Outage { since: Instant::now(), backoff: Backoff::default() }
                    });
                    if o.since.elapsed() >= a.reconnect_for {
                        errln!(
                            "canopy logs: gave up following {} after {} without an answer; the workload runs \
                             on, and once the engine is back `canopy logs {id} --follow` prints its log again",
                            f.attempt,
                            canopy::units::HumanDuration(a.reconnect_for)
                        );
                        f.finish();
                        return Err(e);
                    }
                    tokio::time::sleep(o.backoff.next_wait()).await;
                }
                Err(e) => return Err(e),
            }
        }
        f.finish();
        Ok(None)
    })?;
    match outcome {
        Ok(Some(state)) => {
            outln!("{id} has not started an attempt yet ({state}).");
            Ok(ExitCode::SUCCESS)
        }
        Ok(None) => Ok(ExitCode::SUCCESS),
        Err(code) => Ok(code),
    }
}
