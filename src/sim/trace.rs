//! Workload traces: Gavel's TSV, Tiresias' CSV, the ElasticFlow/ITP CSV,
//! the Pollux/Philly CSV and a documented generic CSV, parsed from text
//! into [`Job`]s.
//!
//! Owns parsing only: every function takes the file's text and a name for
//! error messages; reading the file is the caller's (the CLI's) job. No
//! clock, no randomness.
//!
//! # Formats
//!
//! **Gavel** (`*.trace`, tab-separated, no header; the format of
//! `scheduler/traces/` in github.com/stanford-futuredata/gavel), 7 fields:
//!
//! | # | field | used as |
//! |---|---|---|
//! | 1 | job type, e.g. `ResNet-50 (batch size 64)` | name; duration scale |
//! | 2 | command | ignored |
//! | 3 | the command's step-count flag, e.g. `--num_steps` | ignored |
//! | 4 | needs a data directory (`1`/`0`) | ignored |
//! | 5 | total steps | duration (below) |
//! | 6 | arrival time, seconds from the trace start | submit time |
//! | 7 | scale factor: GPUs the job uses | GPUs |
//!
//! Gavel's generator turned a drawn duration into steps with the job
//! type's V100 throughput, so durations are taken as measured on a V100.
//!
//! Gavel stores work as steps, not time: its generator drew a duration and
//! multiplied it by the job type's throughput. Its throughput tables are
//! not in the trace, so the loader inverts with an estimate taken from the
//! trace itself: a job type's throughput is taken as proportional to the
//! median step count of that type (the generator drew durations from one
//! distribution for every type), scaled so that a median job of any type
//! runs [`GAVEL_MEDIAN_DURATION_S`]. Durations therefore keep each type's
//! spread and the trace's arrival pattern; their absolute scale is this
//! one documented constant.
//!
//! **Tiresias** (`*.csv` with the header
//! `job_id,num_gpu,submit_time,iterations,model_name,duration,interval`,
//! as in github.com/SymbioticLab/Tiresias `simulator/*.csv`): submit time
//! and duration in seconds, `num_gpu` GPUs, `model_name` the name;
//! durations are taken as measured on a P100 (the GPU of the Tiresias
//! paper's testbed).
//!
//! **ElasticFlow/ITP** (`*.csv` whose header starts with
//! `job_id,submission_time`; the format of github.com/microsoft/elasticflow-traces,
//! jobs of Microsoft's internal ITP GPU clusters): columns by name, in any
//! order. Required: `submission_time` (seconds from the start of the
//! collection), `duration` (seconds the job ran), `num_gpu`. The name is
//! `model_name` when the file has it (the `elasticflow-traces` variant,
//! whose model names are generated), else `job_id`. Other columns
//! (`num_iteration`, `deadline`, `batch_size`) are ignored. The trace does
//! not name the GPU model; durations are taken as measured on a V100, the
//! simulator's reference, as for the generic CSV.
//!
//! **Pollux/Philly** (`*.csv` whose header starts with
//! `timestamp,duration,num_gpus`; the format of `simulator/traces/philly.csv`
//! in github.com/petuum/adaptdl, branch `osdi21-artifact`: one row per job
//! of Microsoft's Philly trace, `timestamp,duration,num_gpus,gpu_time,cluster`):
//! columns by name, in any order. Required: `timestamp` (the submit time as
//! the trace's wall clock, `YYYY-MM-DD HH:MM:SS`, no zone), `duration`
//! (seconds the job ran), `num_gpus`. A job's submit time is its timestamp
//! less the file's earliest one, counted on the wall clock (a slice that
//! spans a daylight-saving change is off by that hour there). The name is
//! `vc-` and the `cluster` column (Philly's virtual cluster, the team that
//! ran the job) when present. `gpu_time` (`duration × num_gpus`) is
//! ignored. Philly's GPUs were 12 GB P100s and 24 GB P40s and the trace does
//! not say which ran a job; durations are taken as measured on a P100, as
//! for Tiresias (whose traces are modelled on Philly).
//!
//! **Generic CSV** (any other `*.csv`): a header naming the columns, in
//! any order. Required: `submit_s` (seconds from the trace start),
//! `duration_s` (seconds of work on one attempt), `gpus`. Optional:
//! `name`, `gpu_type` (an accelerator model as the fleet names it, e.g.
//! `H100-SXM5`; a substring match against pool models is enough),
//! `gpu_memory_gb` (minimum per GPU), `outcome` (`ok` or `completed`:
//! the job's own code never fails; `failed`, `app` or `user`: it fails by
//! its own error, see below), `fails_after_s` (for a failed job: seconds
//! of its work, as measured on `measured_on`, after which its own error
//! strikes; at most `duration_s`), `measured_on` (the accelerator model
//! `duration_s` was measured on; default: `gpu_type`, else a V100),
//! `tenant` (the tenant the job is submitted for, when the fleet file
//! gives tenants). Empty optional cells mean "not given".
//!
//! Every CSV format (Tiresias, ElasticFlow/ITP, generic) may add a
//! `tenant` column; Gavel's TSV has none. Jobs without one are assigned
//! to tenants by [`super::tenants::assign`].
//!
//! *When a failed job fails.* A production trace records how long a
//! failed job ran, which is its time to failure: a job whose `outcome` is
//! failed fails by its own error once it has done `fails_after_s` of work,
//! or, without that column, all of its `duration_s` (it never completes).
//! Jobs whose trace records no outcome (Gavel, Tiresias, ITP, Philly) get their
//! fate and its moment from the fault model (`faults::fate`).

use std::sync::Arc;
use thiserror::Error;

/// Median duration of a Gavel job type; see the module docs.
pub const GAVEL_MEDIAN_DURATION_S: f64 = 3600.0;

/// One job of a trace. Its text is shared, not copied, when a job is
/// cloned: the large scenario tiles the trace into 100,000 jobs
/// ([`super::scale::tile`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub name: Arc<str>,
    /// Seconds from the start of the trace.
    pub submit_s: f64,
    /// Seconds of work for one attempt that runs to the end.
    pub duration_s: f64,
    pub gpus: u32,
    pub gpu_type: Option<Arc<str>>,
    pub gpu_memory_gb: Option<f64>,
    /// The job's own fate when the trace says it; otherwise the fault
    /// model draws it.
    pub outcome: Option<Outcome>,
    /// For a job whose `outcome` is [`Outcome::FailsOnItsOwn`]: seconds of
    /// its work (as measured on `measured_on`) after which its own error
    /// strikes, at most `duration_s`; `None` means at `duration_s`.
    pub fails_after_s: Option<f64>,
    /// The accelerator model `duration_s` was measured on; `None` means
    /// [`super::speed::REFERENCE`] (a V100). On another model the job runs
    /// `duration_s / speed::speedup(measured_on, model)`.
    pub measured_on: Option<Arc<str>>,
    /// The tenant it is submitted for (a CSV's `tenant` column); `None`:
    /// assigned by [`super::tenants::assign`] when the fleet has tenants.
    pub tenant: Option<Arc<str>>,
}

impl Job {
    /// A job known only by its submit time, duration (at least a second)
    /// and GPUs, measured on `measured_on`.
    fn timed(name: &str, submit_s: f64, duration_s: f64, gpus: u32, measured_on: &str) -> Self {
        Job {
            name: name.into(),
            submit_s,
            duration_s: duration_s.max(1.0),
            gpus,
            gpu_type: None,
            gpu_memory_gb: None,
            outcome: None,
            fails_after_s: None,
            measured_on: Some(measured_on.into()),
            tenant: None,
        }
    }

    /// The share of its work after which a job the trace records as
    /// failed fails by its own error: `fails_after_s / duration_s`, or 1
    /// (at its recorded end) without that column.
    pub fn fails_at(&self) -> f64 {
        match self.fails_after_s {
            Some(f) if self.duration_s > 0.0 => (f / self.duration_s).clamp(0.0, 1.0),
            _ => 1.0,
        }
    }
}

/// What a job's own code does, wherever it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Completes,
    FailsOnItsOwn,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Gavel,
    Tiresias,
    /// Microsoft's ITP traces as published for ElasticFlow.
    ElasticFlow,
    /// Microsoft's Philly trace as published with Pollux.
    Philly,
    Csv,
}

#[derive(Debug, Error, PartialEq)]
pub enum TraceError {
    #[error("{file}:{line}: {message}")]
    Bad { file: String, line: usize, message: String },
    #[error("{file}: the trace has no jobs")]
    Empty { file: String },
}

fn bad(file: &str, line: usize, message: impl Into<String>) -> TraceError {
    TraceError::Bad { file: file.to_string(), line, message: message.into() }
}

/// The format a file is in, from its name and first line.
pub fn detect(file: &str, text: &str) -> Format {
    let first = text.lines().next().unwrap_or_default().trim();
    if first.starts_with("job_id,num_gpu,submit_time") {
        Format::Tiresias
    } else if first.starts_with("job_id,submission_time") {
        Format::ElasticFlow
    } else if first.starts_with("timestamp,duration,num_gpus") {
        Format::Philly
    } else if file.ends_with(".csv") || (first.contains(',') && !first.contains('\t')) {
        Format::Csv
    } else {
        Format::Gavel
    }
}

/// Parses a trace in `format`; jobs come back in submit order (stable for
/// equal times).
pub fn parse(format: Format, text: &str, file: &str) -> Result<Vec<Job>, TraceError> {
    let mut jobs = match format {
        Format::Gavel => parse_gavel(text, file)?,
        Format::Tiresias => parse_columns(text, file, &TIRESIAS)?,
        Format::ElasticFlow => parse_columns(text, file, &ELASTICFLOW)?,
        Format::Philly => parse_philly(text, file)?,
        Format::Csv => parse_csv(text, file)?,
    };
    if jobs.is_empty() {
        return Err(TraceError::Empty { file: file.to_string() });
    }
    jobs.sort_by(|a, b| a.submit_s.total_cmp(&b.submit_s));
    Ok(jobs)
}

fn num<T: std::str::FromStr>(s: &str, what: &str, file: &str, line: usize) -> Result<T, TraceError> {
    s.trim().parse().map_err(|_| bad(file, line, format!("{what} {:?} is not a number", s.trim())))
}

fn non_negative(v: f64, what: &str, file: &str, line: usize) -> Result<f64, TraceError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(bad(file, line, format!("{what} must be ≥ 0, not {v}")))
    }
}

fn parse_gavel(text: &str, file: &str) -> Result<Vec<Job>, TraceError> {
    struct Row {
        kind: String,
        steps: f64,
        arrival: f64,
        gpus: u32,
    }
    let mut rows = Vec::new();
    for (i, l) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let line = i + 1;
        let f: Vec<&str> = l.split('\t').collect();
        if f.len() != 7 {
            return Err(bad(
                file,
                line,
                format!("expected 7 tab-separated fields (Gavel), found {}", f.len()),
            ));
        }
        let steps = non_negative(num(f[4], "total steps", file, line)?, "total steps", file, line)?;
        let arrival = non_negative(num(f[5], "arrival time", file, line)?, "arrival time", file, line)?;
        let gpus = num(f[6], "scale factor", file, line)?;
        rows.push(Row { kind: f[0].trim().to_string(), steps, arrival, gpus });
    }
    // Median steps per job type: the throughput estimate (module docs).
    let mut by_kind: std::collections::BTreeMap<&str, Vec<f64>> = std::collections::BTreeMap::new();
    for r in &rows {
        by_kind.entry(r.kind.as_str()).or_default().push(r.steps);
    }
    let median: std::collections::BTreeMap<&str, f64> = by_kind
        .into_iter()
        .map(|(k, mut v)| {
            v.sort_by(f64::total_cmp);
            (k, v[v.len() / 2].max(1.0))
        })
        .collect();
    Ok(rows
        .iter()
        .map(|r| Job {
            name: r.kind.as_str().into(),
            submit_s: r.arrival,
            duration_s: (r.steps / median.get(r.kind.as_str()).copied().unwrap_or(1.0)
                * GAVEL_MEDIAN_DURATION_S)
                .max(1.0),
            gpus: r.gpus,
            gpu_type: None,
            gpu_memory_gb: None,
            outcome: None,
            fails_after_s: None,
            measured_on: Some("V100".into()),
            tenant: None,
        })
        .collect())
}

/// Splits a header line into trimmed column names.
fn header(text: &str) -> Vec<String> {
    text.lines().next().unwrap_or_default().split(',').map(|c| c.trim().to_ascii_lowercase()).collect()
}

/// A published trace's native columns: what [`parse_columns`] reads.
struct Columns {
    /// "a Tiresias header", for the error when a column is missing.
    what: &'static str,
    submit: &'static str,
    duration: &'static str,
    gpus: &'static str,
    /// The job's name: the first of these present (required when `name_required`).
    names: &'static [&'static str],
    name_required: bool,
    /// The GPU its durations were measured on.
    measured_on: &'static str,
}

const TIRESIAS: Columns = Columns {
    what: "a Tiresias header",
    submit: "submit_time",
    duration: "duration",
    gpus: "num_gpu",
    names: &["model_name"],
    name_required: true,
    measured_on: "P100",
};

const ELASTICFLOW: Columns = Columns {
    what: "an ElasticFlow/ITP header",
    submit: "submission_time",
    duration: "duration",
    gpus: "num_gpu",
    names: &["model_name", "job_id"],
    name_required: false,
    measured_on: "V100",
};

/// One job a row, from a header naming the columns in `c`; every row has
/// exactly the header's fields.
fn parse_columns(text: &str, file: &str, c: &Columns) -> Result<Vec<Job>, TraceError> {
    let cols = header(text);
    let at = |name: &str| cols.iter().position(|c| c == name);
    let name = c.names.iter().find_map(|n| at(n));
    let tenant = at("tenant");
    let (Some(s), Some(d), Some(g)) = (at(c.submit), at(c.duration), at(c.gpus)) else {
        return Err(bad(file, 1, missing(c)));
    };
    if c.name_required && name.is_none() {
        return Err(bad(file, 1, missing(c)));
    }
    let mut jobs = Vec::new();
    for (i, l) in text.lines().enumerate().skip(1).filter(|(_, l)| !l.trim().is_empty()) {
        let line = i + 1;
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        if f.len() != cols.len() {
            return Err(bad(file, line, format!("expected {} fields, found {}", cols.len(), f.len())));
        }
        let job = Job::timed(
            name.map(|n| f[n]).filter(|v| !v.is_empty()).unwrap_or("job"),
            non_negative(num(f[s], c.submit, file, line)?, c.submit, file, line)?,
            non_negative(num(f[d], c.duration, file, line)?, c.duration, file, line)?,
            num(f[g], c.gpus, file, line)?,
            c.measured_on,
        );
        let tenant = tenant.map(|t| f[t]).filter(|v| !v.is_empty()).map(Arc::from);
        jobs.push(Job { tenant, ..job });
    }
    Ok(jobs)
}

/// The Pollux/Philly CSV (module docs): wall-clock submit times, made
/// relative to the file's earliest.
fn parse_philly(text: &str, file: &str) -> Result<Vec<Job>, TraceError> {
    let cols = header(text);
    let at = |name: &str| cols.iter().position(|c| c == name);
    let (Some(t), Some(d), Some(g)) = (at("timestamp"), at("duration"), at("num_gpus")) else {
        return Err(bad(file, 1, "a Pollux/Philly header needs timestamp, duration and num_gpus"));
    };
    let (vc, tenant) = (at("cluster"), at("tenant"));
    let mut rows = Vec::new();
    for (i, l) in text.lines().enumerate().skip(1).filter(|(_, l)| !l.trim().is_empty()) {
        let line = i + 1;
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        if f.len() != cols.len() {
            return Err(bad(file, line, format!("expected {} fields, found {}", cols.len(), f.len())));
        }
        let at_s = wall_clock_s(f[t]).ok_or_else(|| {
            bad(file, line, format!("timestamp {:?} is not a time like 2017-11-06 00:02:11", f[t]))
        })?;
        let name = match vc.map(|c| f[c]).filter(|v| !v.is_empty()) {
            Some(v) => format!("vc-{v}"),
            None => "job".to_string(),
        };
        let duration = non_negative(num(f[d], "duration", file, line)?, "duration", file, line)?;
        let tenant = tenant.map(|t| f[t]).filter(|v| !v.is_empty()).map(str::to_string);
        rows.push((name, at_s, duration, num(f[g], "num_gpus", file, line)?, tenant));
    }
    let start = rows.iter().map(|r| r.1).min().unwrap_or(0);
    Ok(rows
        .into_iter()
        .map(|(name, at_s, duration, gpus, tenant)| Job {
            tenant: tenant.map(Arc::from),
            ..Job::timed(&name, (at_s - start) as f64, duration, gpus, "P100")
        })
        .collect())
}

/// Seconds of a zone-less `YYYY-MM-DD HH:MM:SS` wall-clock time, counted
/// as if it were UTC (only differences are used).
fn wall_clock_s(s: &str) -> Option<i64> {
    let dt = jiff::civil::DateTime::strptime("%Y-%m-%d %H:%M:%S", s).ok()?;
    Some(dt.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp().as_second())
}

/// "a Tiresias header needs submit_time, duration, num_gpu and model_name".
fn missing(c: &Columns) -> String {
    let mut need = vec![c.submit, c.duration, c.gpus];
    if c.name_required {
        need.extend(c.names.first());
    }
    let last = need.pop().unwrap_or_default();
    format!("{} needs {} and {last}", c.what, need.join(", "))
}

fn parse_csv(text: &str, file: &str) -> Result<Vec<Job>, TraceError> {
    let cols = header(text);
    let at = |name: &str| cols.iter().position(|c| c == name);
    let (Some(s), Some(d), Some(g)) = (at("submit_s"), at("duration_s"), at("gpus")) else {
        return Err(bad(
            file,
            1,
            "the header must name submit_s, duration_s and gpus (optional: name, gpu_type, gpu_memory_gb, outcome, fails_after_s, measured_on, tenant)",
        ));
    };
    let (name, ty, mem, out) = (at("name"), at("gpu_type"), at("gpu_memory_gb"), at("outcome"));
    let (measured, fails, tenant) = (at("measured_on"), at("fails_after_s"), at("tenant"));
    let mut jobs = Vec::new();
    for (i, l) in text.lines().enumerate().skip(1).filter(|(_, l)| !l.trim().is_empty()) {
        let line = i + 1;
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        if f.len() != cols.len() {
            return Err(bad(file, line, format!("expected {} fields, found {}", cols.len(), f.len())));
        }
        let cell = |c: Option<usize>| c.map(|c| f[c]).filter(|v| !v.is_empty());
        let outcome = match cell(out).map(str::to_ascii_lowercase).as_deref() {
            None => None,
            Some("ok" | "completed" | "complete" | "success" | "succeeded") => Some(Outcome::Completes),
            Some("failed" | "fail" | "app" | "user") => Some(Outcome::FailsOnItsOwn),
            Some(other) => {
                return Err(bad(
                    file,
                    line,
                    format!("outcome {other:?} is not one of ok, completed, failed, app, user"),
                ));
            }
        };
        let gpu_memory_gb = match cell(mem) {
            Some(v) => Some(non_negative(num(v, "gpu_memory_gb", file, line)?, "gpu_memory_gb", file, line)?),
            None => None,
        };
        let duration_s =
            non_negative(num(f[d], "duration_s", file, line)?, "duration_s", file, line)?.max(1.0);
        let fails_after_s = match cell(fails) {
            Some(v) => {
                let v = non_negative(num(v, "fails_after_s", file, line)?, "fails_after_s", file, line)?;
                if outcome != Some(Outcome::FailsOnItsOwn) {
                    return Err(bad(
                        file,
                        line,
                        "fails_after_s is given but outcome is not failed; give outcome failed or leave fails_after_s empty",
                    ));
                }
                if v > duration_s {
                    return Err(bad(
                        file,
                        line,
                        format!(
                            "fails_after_s {v} is past the job's duration_s {duration_s}: a job fails within its run"
                        ),
                    ));
                }
                Some(v)
            }
            None => None,
        };
        jobs.push(Job {
            name: cell(name).unwrap_or("job").into(),
            submit_s: non_negative(num(f[s], "submit_s", file, line)?, "submit_s", file, line)?,
            duration_s,
            gpus: num(f[g], "gpus", file, line)?,
            gpu_type: cell(ty).map(Arc::from),
            gpu_memory_gb,
            outcome,
            fails_after_s,
            measured_on: cell(measured).or(cell(ty)).map(Arc::from),
            tenant: cell(tenant).map(Arc::from),
        });
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gavel_rows_become_jobs_with_type_relative_durations() {
        let text = "A\tcmd\t-n\t1\t100\t0.0\t1\nA\tcmd\t-n\t1\t300\t5.0\t8\nA\tcmd\t-n\t1\t200\t2.5\t4\n";
        let jobs = parse(detect("x.trace", text), text, "x.trace").unwrap();
        assert_eq!(jobs.len(), 3);
        assert_eq!(jobs[1].submit_s, 2.5);
        assert_eq!(jobs[1].gpus, 4);
        // Median steps (200) run GAVEL_MEDIAN_DURATION_S.
        assert_eq!(jobs[1].duration_s, GAVEL_MEDIAN_DURATION_S);
        assert_eq!(jobs[0].duration_s, GAVEL_MEDIAN_DURATION_S / 2.0);
        let err = parse(Format::Gavel, "A\tb\n", "y.trace").unwrap_err();
        assert!(err.to_string().starts_with("y.trace:1: expected 7"));
    }

    #[test]
    fn tiresias_and_generic_csv() {
        let t =
            "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,2,30,606,vgg19,164,30\n";
        let jobs = parse(detect("t.csv", t), t, "t.csv").unwrap();
        assert_eq!((jobs[0].gpus, jobs[0].submit_s, jobs[0].duration_s), (2, 30.0, 164.0));
        let c = "gpus,submit_s,duration_s,gpu_type,outcome\n1,0,60,H100,failed\n2,10,120,,\n";
        let jobs = parse(detect("c.csv", c), c, "c.csv").unwrap();
        assert_eq!(jobs[0].outcome, Some(Outcome::FailsOnItsOwn));
        assert_eq!(jobs[0].gpu_type.as_deref(), Some("H100"));
        assert_eq!(jobs[1].gpu_type, None);
        let e = parse(Format::Csv, "gpus,submit_s\n1,0\n", "c.csv").unwrap_err();
        assert!(e.to_string().contains("duration_s"));
    }

    #[test]
    fn a_failed_job_fails_at_its_recorded_time() {
        let c = "gpus,submit_s,duration_s,outcome,fails_after_s\n1,0,600,failed,150\n1,0,600,failed,\n1,0,600,ok,\n";
        let jobs = parse(detect("c.csv", c), c, "c.csv").unwrap();
        assert_eq!((jobs[0].fails_after_s, jobs[0].fails_at()), (Some(150.0), 0.25));
        assert_eq!((jobs[1].fails_after_s, jobs[1].fails_at()), (None, 1.0));
        let e =
            parse(Format::Csv, "gpus,submit_s,duration_s,outcome,fails_after_s\n1,0,60,failed,90\n", "c.csv")
                .unwrap_err();
        assert_eq!(
            e.to_string(),
            "c.csv:2: fails_after_s 90 is past the job's duration_s 60: a job fails within its run"
        );
        let e = parse(Format::Csv, "gpus,submit_s,duration_s,outcome,fails_after_s\n1,0,60,ok,30\n", "c.csv")
            .unwrap_err();
        assert!(e.to_string().contains("outcome is not failed"), "{e}");
    }

    #[test]
    fn a_missing_column_is_named_with_what_the_format_needs() {
        let e =
            parse(Format::Tiresias, "job_id,num_gpu,submit_time,duration\n0,1,0,5\n", "t.csv").unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.csv:1: a Tiresias header needs submit_time, duration, num_gpu and model_name"
        );
        let e = parse(Format::ElasticFlow, "job_id,submission_time,num_gpu\n", "e.csv").unwrap_err();
        assert_eq!(
            e.to_string(),
            "e.csv:1: an ElasticFlow/ITP header needs submission_time, duration and num_gpu"
        );
    }

    #[test]
    fn philly_rows_start_at_the_earliest_timestamp_and_name_their_vc() {
        // As the Pollux artifact publishes it: not in submit order.
        let t = "timestamp,duration,num_gpus,gpu_time,cluster\n2017-11-07 00:00:10,66.0,1,66.0,11cb48\n2017-11-06 23:59:50,2951.0,8,23608.0,6214e9\n";
        assert_eq!(detect("philly.csv", t), Format::Philly);
        let jobs = parse(Format::Philly, t, "philly.csv").unwrap();
        assert_eq!(
            (jobs[0].name.as_ref(), jobs[0].submit_s, jobs[0].duration_s, jobs[0].gpus),
            ("vc-6214e9", 0.0, 2951.0, 8)
        );
        // 20 s later, across midnight.
        assert_eq!((jobs[1].name.as_ref(), jobs[1].submit_s), ("vc-11cb48", 20.0));
        assert_eq!(jobs[1].measured_on.as_deref(), Some("P100"));
        assert_eq!(jobs[1].outcome, None);
        let e = parse(Format::Philly, "timestamp,duration,num_gpus\n2017-11-07,5,1\n", "p.csv").unwrap_err();
        assert_eq!(e.to_string(), "p.csv:2: timestamp \"2017-11-07\" is not a time like 2017-11-06 00:02:11");
        let e = parse(Format::Philly, "timestamp,num_gpus\n", "p.csv").unwrap_err();
        assert_eq!(e.to_string(), "p.csv:1: a Pollux/Philly header needs timestamp, duration and num_gpus");
    }

    #[test]
    fn elasticflow_raw_and_generated_variants() {
        // The raw ITP trace: no trailing newline in the published files.
        let raw = "job_id,submission_time,duration,num_gpu\n6b2d9ccc-6279,16566,3890,4\nfb10-98,5010,1265,64";
        let jobs = parse(detect("cluster02.csv", raw), raw, "cluster02.csv").unwrap();
        assert_eq!(detect("cluster02.csv", raw), Format::ElasticFlow);
        assert_eq!(jobs.len(), 2);
        // Submit order, whatever the file's order.
        assert_eq!(
            (jobs[0].name.as_ref(), jobs[0].submit_s, jobs[0].duration_s, jobs[0].gpus),
            ("fb10-98", 5010.0, 1265.0, 64)
        );
        assert_eq!(jobs[1].measured_on.as_deref(), Some("V100"));
        let generated = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n6b2d,16566,40285,bert,21347,64,4,3890\n";
        let jobs = parse(detect("c.csv", generated), generated, "c.csv").unwrap();
        assert_eq!((jobs[0].name.as_ref(), jobs[0].gpus, jobs[0].duration_s), ("bert", 4, 3890.0));
        let e = parse(Format::ElasticFlow, "job_id,submission_time,num_gpu\nx,0,1\n", "e.csv").unwrap_err();
        assert!(e.to_string().contains("duration"), "{e}");
        let e = parse(Format::ElasticFlow, "job_id,submission_time,duration,num_gpu\nx,0,-5,1\n", "e.csv")
            .unwrap_err();
        assert_eq!(e.to_string(), "e.csv:2: duration must be ≥ 0, not -5");
        let e = parse(Format::ElasticFlow, "job_id,submission_time,duration,num_gpu\nx,0,5\n", "e.csv")
            .unwrap_err();
        assert_eq!(e.to_string(), "e.csv:2: expected 4 fields, found 3");
    }
}
