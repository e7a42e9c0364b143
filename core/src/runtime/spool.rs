//! The on-disk spool: while no debugger is attached, envelopes that would fall out of the
//! replay ring are appended here instead of being lost, and replayed (in order, before the
//! ring) on the next attach. Off unless `spoolDir` / `GRAPHMIND_SPOOL_DIR` names a folder.
//!
//! Layout: one folder per process and session, `<spoolDir>/<app>-<pid>-<ms>-<rand>/`,
//! holding an `owner` file (JSON: pid, app, start time) that the owning process keeps
//! `flock`ed for as long as it lives, and numbered segments `000001.seg`, `000002.seg`, ...
//! Each segment starts with [`SEGMENT_MAGIC`], then records:
//!
//! ```text
//! u32 LE body length | u32 LE CRC-32 of the body | body = u64 LE seq, u16 LE run id length,
//! run id (UTF-8), frame (UTF-8 envelope text)
//! ```
//!
//! A record whose length runs past the end of the file (a write torn by a crash) or whose
//! CRC does not match ends the segment's reading: it and anything after it in that segment
//! is skipped and counted, never misread.
//!
//! Bounded in bytes ([`DEFAULT_SPOOL_MAX_BYTES`] unless `spoolMaxBytes` says otherwise),
//! in [`SEGMENTS_PER_SPOOL`] segments: when a record would exceed the bound, the oldest
//! segment is deleted whole and [`Spool::append`] returns, per run, the exact count and seq
//! range of what it held, for the caller's gap markers.
//!
//! A spool left by a process that died (its `owner` lock is free) is found by
//! [`find_left`], for `graphmind serve` and `graphmind import --spool` to store.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Default byte bound of one process's spool (`spoolMaxBytes`): 64 MiB.
pub const DEFAULT_SPOOL_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// The bound is split into this many segments; the oldest is dropped whole.
pub const SEGMENTS_PER_SPOOL: u64 = 16;
/// Smallest segment size, whatever the bound.
pub const MIN_SEGMENT_BYTES: u64 = 4 * 1024;
/// The first bytes of every segment file.
pub const SEGMENT_MAGIC: &[u8; 8] = b"GMSPOOL1";
/// Bytes in front of each record's body: its length and its CRC-32.
pub const RECORD_HEADER_BYTES: usize = 8;
/// The file the owning process keeps locked.
pub const OWNER_FILE: &str = "owner";
/// The extension of a segment file.
pub const SEGMENT_EXT: &str = "seg";
/// A body longer than this is not believed (a corrupt length): 64 MiB.
pub const MAX_RECORD_BYTES: u32 = 64 * 1024 * 1024;

/// What can go wrong with a spool.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// A file or folder could not be made, written or read.
    #[error("spool {path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> SpoolError + '_ {
    move |source| SpoolError::Io {
        path: path.to_owned(),
        source,
    }
}

/// One spooled envelope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its run.
    pub run_id: String,
    /// Its seq.
    pub seq: u64,
    /// The envelope text.
    pub frame: String,
}

/// One spooled envelope, borrowed from the segment bytes it was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// Its run.
    pub run_id: &'a str,
    /// Its seq.
    pub seq: u64,
    /// The envelope text.
    pub frame: &'a str,
}

impl RecordRef<'_> {
    /// An owned copy.
    pub fn to_record(self) -> Record {
        Record {
            run_id: self.run_id.to_owned(),
            seq: self.seq,
            frame: self.frame.to_owned(),
        }
    }
}

/// The events of one run that a dropped segment held: exact, since a segment is a
/// contiguous stretch of the spool and nothing of that run between `from_seq` and `to_seq`
/// survives elsewhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DroppedRange {
    /// The run.
    pub run_id: String,
    /// How many of its events the segment held.
    pub count: u64,
    /// The smallest seq among them.
    pub from_seq: u64,
    /// The largest.
    pub to_seq: u64,
}

#[derive(Debug)]
struct Segment {
    path: PathBuf,
    bytes: u64,
    records: u64,
    runs: Vec<DroppedRange>,
}

impl Segment {
    fn note(&mut self, run_id: &str, seq: u64) {
        self.records += 1;
        // Runs are few and a run's events come in streaks: look from the newest.
        if let Some(r) = self.runs.iter_mut().rev().find(|r| r.run_id == run_id) {
            r.count += 1;
            r.from_seq = r.from_seq.min(seq);
            r.to_seq = r.to_seq.max(seq);
        } else {
            self.runs.push(DroppedRange {
                run_id: run_id.to_owned(),
                count: 1,
                from_seq: seq,
                to_seq: seq,
            });
        }
    }
}

/// The owner lock of a spool folder, held while the file stays open.
#[derive(Debug)]
struct OwnerLock {
    _file: File,
}

/// Takes the lock on `file` without waiting: false when another process (or another open
/// of the same file) holds it.
#[cfg(unix)]
fn try_lock(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this `File` owns for the duration of the call.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

#[cfg(not(unix))]
fn try_lock(_file: &File) -> bool {
    // No portable lock here: every spool looks alive, so none is picked up by mistake.
    false
}

/// A process's spool, open for appending.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    _owner: OwnerLock,
    segments: VecDeque<Segment>,
    writer: Option<BufWriter<File>>,
    next_number: u64,
    total_bytes: u64,
    max_bytes: u64,
    segment_bytes: u64,
    records: u64,
}

/// The name of a spool folder: the app name kept to `[A-Za-z0-9_.]` (at most 40), the pid,
/// the time and a random part, so two sessions of one process never share a folder.
fn folder_name(app: &str) -> String {
    let app: String = app
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let rand = crate::random::to_hex(&crate::random::bytes_or_fallback::<4>());
    format!("{app}-{}-{ms}-{rand}", std::process::id())
}

impl Spool {
    /// Makes this process's spool folder under `base` (created if missing) and locks it.
    pub fn create(base: &Path, app: &str, max_bytes: u64) -> Result<Spool, SpoolError> {
        fs::create_dir_all(base).map_err(io_at(base))?;
        let dir = base.join(folder_name(app));
        fs::create_dir(&dir).map_err(io_at(&dir))?;
        let owner_path = dir.join(OWNER_FILE);
        let mut owner = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&owner_path)
            .map_err(io_at(&owner_path))?;
        try_lock(&owner);
        let mut meta = crate::json::Map::new();
        meta.insert(
            "pid",
            crate::json::Value::from(u64::from(std::process::id())),
        );
        meta.insert("app", crate::json::Value::from(app));
        owner
            .write_all(crate::json::to_string(&crate::json::Value::Object(meta)).as_bytes())
            .map_err(io_at(&owner_path))?;
        let max_bytes = max_bytes.max(MIN_SEGMENT_BYTES * 2);
        Ok(Spool {
            dir,
            _owner: OwnerLock { _file: owner },
            segments: VecDeque::new(),
            writer: None,
            next_number: 1,
            total_bytes: 0,
            max_bytes,
            segment_bytes: (max_bytes / SEGMENTS_PER_SPOOL).max(MIN_SEGMENT_BYTES),
            records: 0,
        })
    }

    /// The spool's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Records held now.
    pub fn len(&self) -> u64 {
        self.records
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Bytes held now (segment headers included).
    pub fn bytes(&self) -> u64 {
        self.total_bytes
    }

    fn open_segment(&mut self) -> Result<(), SpoolError> {
        let path = self
            .dir
            .join(format!("{:06}.{SEGMENT_EXT}", self.next_number));
        self.next_number += 1;
        let file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&path)
            .map_err(io_at(&path))?;
        let mut writer = BufWriter::with_capacity(64 * 1024, file);
        writer.write_all(SEGMENT_MAGIC).map_err(io_at(&path))?;
        self.total_bytes += SEGMENT_MAGIC.len() as u64;
        self.segments.push_back(Segment {
            path,
            bytes: SEGMENT_MAGIC.len() as u64,
            records: 0,
            runs: Vec::new(),
        });
        self.writer = Some(writer);
        Ok(())
    }

    /// Appends one envelope. When the bound would be passed, the oldest segments are
    /// deleted first; what they held is returned, per segment and run (empty: nothing
    /// dropped). The write reaches the file on [`flush`](Self::flush).
    pub fn append(
        &mut self,
        run_id: &str,
        seq: u64,
        frame: &str,
    ) -> Result<Vec<DroppedRange>, SpoolError> {
        let run = &run_id.as_bytes()[..run_id.len().min(u16::MAX as usize)];
        let body_len = 8 + 2 + run.len() + frame.len();
        let size = (RECORD_HEADER_BYTES + body_len) as u64;
        let rotate = match self.segments.back() {
            None => true,
            Some(s) => s.records > 0 && s.bytes + size > self.segment_bytes,
        };
        let mut dropped = Vec::new();
        if rotate {
            if self.writer.is_some() {
                self.flush()?;
            }
            self.writer = None;
            // Room for a whole new segment (or this record, if larger): drop the oldest
            // while the bound could be passed.
            let room = self.segment_bytes.max(SEGMENT_MAGIC.len() as u64 + size);
            while !self.segments.is_empty() && self.total_bytes + room > self.max_bytes {
                dropped.extend(self.drop_oldest()?);
            }
            self.open_segment()?;
        }
        let mut crc = crc32fast::Hasher::new();
        let seq_bytes = seq.to_le_bytes();
        let run_len = (run.len() as u16).to_le_bytes();
        crc.update(&seq_bytes);
        crc.update(&run_len);
        crc.update(run);
        crc.update(frame.as_bytes());
        let mut header = [0u8; RECORD_HEADER_BYTES];
        header[..4].copy_from_slice(&(body_len as u32).to_le_bytes());
        header[4..].copy_from_slice(&crc.finalize().to_le_bytes());
        let segment = self.segments.back_mut().expect("a segment is open");
        let writer = self.writer.as_mut().expect("a segment is open");
        let path = &segment.path;
        for part in [&header[..], &seq_bytes, &run_len, run, frame.as_bytes()] {
            writer.write_all(part).map_err(io_at(path))?;
        }
        segment.bytes += size;
        segment.note(run_id, seq);
        self.total_bytes += size;
        self.records += 1;
        Ok(dropped)
    }

    fn drop_oldest(&mut self) -> Result<Vec<DroppedRange>, SpoolError> {
        let Some(old) = self.segments.pop_front() else {
            return Ok(Vec::new());
        };
        if self.segments.is_empty() {
            self.writer = None;
        }
        fs::remove_file(&old.path).map_err(io_at(&old.path))?;
        self.total_bytes -= old.bytes;
        self.records -= old.records;
        Ok(old.runs)
    }

    /// Hands what was appended to the operating system (it survives the process crashing
    /// from here on; not a disk sync).
    pub fn flush(&mut self) -> Result<(), SpoolError> {
        if let (Some(w), Some(s)) = (self.writer.as_mut(), self.segments.back()) {
            w.flush().map_err(io_at(&s.path))?;
        }
        Ok(())
    }

    /// Every record held, oldest first.
    pub fn records(&mut self) -> Result<Vec<Record>, SpoolError> {
        self.flush()?;
        let mut out = Vec::with_capacity(self.records as usize);
        for s in &self.segments {
            read_segment(&s.path, &mut out)?;
        }
        Ok(out)
    }

    /// Deletes every segment (after a successful replay).
    pub fn clear(&mut self) -> Result<(), SpoolError> {
        self.writer = None;
        while let Some(s) = self.segments.pop_front() {
            fs::remove_file(&s.path).map_err(io_at(&s.path))?;
        }
        self.total_bytes = 0;
        self.records = 0;
        Ok(())
    }

    /// Deletes the folder (the spool is empty or no longer wanted).
    pub fn remove(mut self) -> Result<(), SpoolError> {
        self.clear()?;
        fs::remove_dir_all(&self.dir).map_err(io_at(&self.dir))
    }
}

/// What reading one segment found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOutcome {
    /// Complete records read.
    pub records: u64,
    /// Bytes skipped at the end: a torn or corrupt record and what followed it.
    pub skipped_bytes: u64,
}

/// Reads the complete records of one segment file into `out`, stopping at the first torn
/// or corrupt record (see the module doc).
pub fn read_segment(path: &Path, out: &mut Vec<Record>) -> Result<ReadOutcome, SpoolError> {
    let mut data = Vec::new();
    read_file(path, &mut data)?;
    Ok(parse_segment(&data, out))
}

/// Reads the file at `path` into `buf` (emptied first, its capacity kept).
fn read_file(path: &Path, buf: &mut Vec<u8>) -> Result<(), SpoolError> {
    buf.clear();
    File::open(path)
        .and_then(|mut f| {
            // Room for the whole file at once (no growing copies on the way).
            let len = f.metadata().map_or(0, |m| m.len() as usize);
            buf.reserve(len);
            f.read_to_end(buf)
        })
        .map_err(io_at(path))?;
    Ok(())
}

/// [`read_segment`] on bytes already read.
pub fn parse_segment(data: &[u8], out: &mut Vec<Record>) -> ReadOutcome {
    parse_segment_each(data, |r| out.push(r.to_record()))
}

/// Each complete record of a segment's bytes, in order, borrowed (nothing copied), stopping
/// at the first torn or corrupt record as [`parse_segment`] does.
pub fn parse_segment_each(data: &[u8], mut each: impl FnMut(RecordRef<'_>)) -> ReadOutcome {
    let mut outcome = ReadOutcome::default();
    if !data.starts_with(SEGMENT_MAGIC) {
        outcome.skipped_bytes = data.len() as u64;
        return outcome;
    }
    let mut at = SEGMENT_MAGIC.len();
    while at < data.len() {
        match parse_record(&data[at..]) {
            Some((record, used)) => {
                each(record);
                outcome.records += 1;
                at += used;
            }
            None => {
                outcome.skipped_bytes = (data.len() - at) as u64;
                break;
            }
        }
    }
    outcome
}

fn parse_record(data: &[u8]) -> Option<(RecordRef<'_>, usize)> {
    let header = data.get(..RECORD_HEADER_BYTES)?;
    let len = u32::from_le_bytes(header[..4].try_into().ok()?);
    let crc = u32::from_le_bytes(header[4..].try_into().ok()?);
    if len > MAX_RECORD_BYTES || (len as usize) < 10 {
        return None;
    }
    let body = data.get(RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + len as usize)?;
    if crc32fast::hash(body) != crc {
        return None;
    }
    let seq = u64::from_le_bytes(body[..8].try_into().ok()?);
    let run_len = u16::from_le_bytes(body[8..10].try_into().ok()?) as usize;
    let run = body.get(10..10 + run_len)?;
    let frame = &body[10 + run_len..];
    let record = RecordRef {
        run_id: std::str::from_utf8(run).ok()?,
        seq,
        frame: std::str::from_utf8(frame).ok()?,
    };
    Some((record, RECORD_HEADER_BYTES + len as usize))
}

/// Bytes [`LeftSpool::each_record`] reads from a segment at a time (a longer record is read
/// whole).
pub const SEGMENT_READ_BYTES: usize = 4 * 1024 * 1024;

/// Why [`stream_records`] stopped early: reading, or the caller's `each`.
enum StreamError<E> {
    Io(io::Error),
    Each(E),
}

impl<E: From<SpoolError>> StreamError<E> {
    fn into_error(self, path: &Path) -> E {
        match self {
            StreamError::Io(e) => io_at(path)(e).into(),
            StreamError::Each(e) => e,
        }
    }
}

/// [`parse_segment_each`] over a segment read from `file` about `chunk` bytes at a time
/// into `buf` (emptied first, its capacity kept): the same records, the same stop at the
/// first torn or corrupt one, the same count of skipped bytes.
fn stream_records<E>(
    file: &mut impl Read,
    chunk: usize,
    buf: &mut Vec<u8>,
    each: &mut impl FnMut(RecordRef<'_>) -> Result<(), E>,
) -> Result<ReadOutcome, StreamError<E>> {
    let mut outcome = ReadOutcome::default();
    buf.clear();
    // Appends up to `want` more bytes (fewer only at the end of the file); true at the end.
    let mut more = |buf: &mut Vec<u8>, want: usize| -> Result<bool, StreamError<E>> {
        buf.reserve(want);
        let got = (&mut *file)
            .take(want as u64)
            .read_to_end(buf)
            .map_err(StreamError::Io)?;
        Ok(got < want)
    };
    let mut ended = more(buf, chunk.max(SEGMENT_MAGIC.len()))?;
    if !buf.starts_with(SEGMENT_MAGIC) {
        let rest = io::copy(file, &mut io::sink()).map_err(StreamError::Io)?;
        outcome.skipped_bytes = buf.len() as u64 + rest;
        return Ok(outcome);
    }
    let mut at = SEGMENT_MAGIC.len();
    loop {
        let left = &buf[at..];
        if let Some((record, used)) = parse_record(left) {
            each(record).map_err(StreamError::Each)?;
            outcome.records += 1;
            at += used;
            continue;
        }
        // Incomplete (read on, unless the file ended: a torn tail) or corrupt (stop).
        let need = match left.get(..4) {
            None => RECORD_HEADER_BYTES,
            Some(len) => {
                let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
                if len > MAX_RECORD_BYTES || (len as usize) < 10 {
                    0
                } else {
                    RECORD_HEADER_BYTES + len as usize
                }
            }
        };
        if need > left.len() && !ended {
            buf.drain(..at);
            at = 0;
            ended = more(buf, (need - buf.len()).max(chunk))?;
            continue;
        }
        let rest = if ended {
            0
        } else {
            io::copy(file, &mut io::sink()).map_err(StreamError::Io)?
        };
        outcome.skipped_bytes = (buf.len() - at) as u64 + rest;
        return Ok(outcome);
    }
}

/// A spool folder whose owner is gone, locked by the caller while it holds this.
#[derive(Debug)]
pub struct LeftSpool {
    /// The folder.
    pub dir: PathBuf,
    /// The owner's pid, as it wrote it.
    pub pid: Option<u64>,
    /// The owner's app name, as it wrote it.
    pub app: Option<String>,
    _owner: OwnerLock,
}

impl LeftSpool {
    /// Opens `dir` as a left spool: `None` when it is not a spool folder or its owner still
    /// holds it (a live process).
    pub fn open(dir: &Path) -> Option<LeftSpool> {
        let owner_path = dir.join(OWNER_FILE);
        let file = OpenOptions::new().read(true).open(&owner_path).ok()?;
        if !try_lock(&file) {
            return None;
        }
        let text = fs::read_to_string(&owner_path).unwrap_or_default();
        let meta = crate::json::parse(text.as_bytes()).ok();
        let field = |k: &str| meta.as_ref().and_then(|m| m.get(k)).cloned();
        Some(LeftSpool {
            dir: dir.to_owned(),
            pid: field("pid").and_then(|v| v.as_f64()).map(|p| p as u64),
            app: field("app").and_then(|v| v.as_str().map(str::to_owned)),
            _owner: OwnerLock { _file: file },
        })
    }

    /// The segment files, oldest first.
    pub fn segments(&self) -> Result<Vec<PathBuf>, SpoolError> {
        let mut paths: Vec<PathBuf> = fs::read_dir(&self.dir)
            .map_err(io_at(&self.dir))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == SEGMENT_EXT))
            .collect();
        paths.sort();
        Ok(paths)
    }

    /// Every complete record, oldest first, and what reading skipped.
    pub fn records(&self) -> Result<(Vec<Record>, ReadOutcome), SpoolError> {
        let mut out = Vec::new();
        let mut total = ReadOutcome::default();
        for path in self.segments()? {
            let o = read_segment(&path, &mut out)?;
            total.records += o.records;
            total.skipped_bytes += o.skipped_bytes;
        }
        Ok((out, total))
    }

    /// Calls `each` on every complete record, oldest first, borrowed from a buffer that
    /// reads the segments [`SEGMENT_READ_BYTES`] at a time (a spool of any size, or a
    /// segment of any size, costs about that much memory, reused throughout), and returns
    /// what reading skipped, as [`read_segment`] would. A read error stops it (and is
    /// returned), as does an error of `each`.
    pub fn each_record<E: From<SpoolError>>(
        &self,
        mut each: impl FnMut(RecordRef<'_>) -> Result<(), E>,
    ) -> Result<ReadOutcome, E> {
        let mut total = ReadOutcome::default();
        let mut buf = Vec::new();
        for path in self.segments()? {
            let mut file = File::open(&path).map_err(io_at(&path))?;
            let o = stream_records(&mut file, SEGMENT_READ_BYTES, &mut buf, &mut each)
                .map_err(|e| e.into_error(&path))?;
            total.records += o.records;
            total.skipped_bytes += o.skipped_bytes;
        }
        Ok(total)
    }

    /// Deletes the folder once its records are stored.
    pub fn remove(self) -> Result<(), SpoolError> {
        fs::remove_dir_all(&self.dir).map_err(io_at(&self.dir))
    }
}

/// The spools under `base` whose owner is gone (oldest folder name first); `base` itself
/// when it is one. A folder that does not exist holds none.
pub fn find_left(base: &Path) -> Vec<LeftSpool> {
    if let Some(one) = LeftSpool::open(base) {
        return vec![one];
    }
    let Ok(entries) = fs::read_dir(base) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.iter().filter_map(|d| LeftSpool::open(d)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "gm-spool-unit-{name}-{}-{}",
            std::process::id(),
            crate::random::to_hex(&crate::random::bytes_or_fallback::<4>())
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn frame(seq: u64) -> String {
        format!(
            r#"{{"gm":1,"seq":{seq},"ts":1,"runId":"r","type":"graph.hint","payload":{{"nodes":[]}}}}"#
        )
    }

    #[test]
    fn records_come_back_in_order_and_clear_deletes_them() {
        let base = tmp("order");
        let mut s = Spool::create(&base, "my app/1", DEFAULT_SPOOL_MAX_BYTES).unwrap();
        assert!(s
            .dir()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("my_app_1-"));
        for seq in 0..100 {
            assert!(s.append("r", seq, &frame(seq)).unwrap().is_empty());
        }
        let got = s.records().unwrap();
        assert_eq!(got.len(), 100);
        assert!(got
            .iter()
            .enumerate()
            .all(|(i, r)| r.seq == i as u64 && r.frame == frame(i as u64)));
        s.clear().unwrap();
        assert!(s.is_empty() && s.records().unwrap().is_empty());
        s.append("r", 7, &frame(7)).unwrap();
        assert_eq!(s.records().unwrap().len(), 1);
        let dir = s.dir().to_owned();
        s.remove().unwrap();
        assert!(!dir.exists());
        let _ = fs::remove_dir_all(base);
    }

    #[test]
    fn a_torn_tail_is_skipped_never_misread() {
        let base = tmp("torn");
        let mut s = Spool::create(&base, "a", DEFAULT_SPOOL_MAX_BYTES).unwrap();
        for seq in 0..10 {
            s.append("r", seq, &frame(seq)).unwrap();
        }
        s.flush().unwrap();
        let seg = s.segments[0].path.clone();
        let full = fs::read(&seg).unwrap();
        // Every cut inside the last record leaves exactly the nine before it.
        let last = RECORD_HEADER_BYTES + 8 + 2 + 1 + frame(9).len();
        for cut in 1..last {
            let mut out = Vec::new();
            let o = parse_segment(&full[..full.len() - cut], &mut out);
            assert_eq!(o.records, 9, "cut {cut}");
            assert_eq!(o.skipped_bytes as usize, last - cut);
            assert_eq!(out.last().unwrap().seq, 8);
        }
        // A flipped byte in record 5's frame: records 0-4 are read, the rest skipped.
        let mut bad = full.clone();
        let rec = RECORD_HEADER_BYTES + 8 + 2 + 1 + frame(0).len();
        bad[SEGMENT_MAGIC.len() + 5 * rec + RECORD_HEADER_BYTES + 20] ^= 0x40;
        let mut out = Vec::new();
        let o = parse_segment(&bad, &mut out);
        assert_eq!(o.records, 5);
        assert_eq!(
            out.iter().map(|r| r.seq).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 4]
        );
        // Not a segment at all.
        let mut out = Vec::new();
        assert_eq!(parse_segment(b"hello", &mut out).records, 0);
        drop(s);
        let _ = fs::remove_dir_all(base);
    }

    #[test]
    fn reading_a_segment_in_chunks_finds_what_reading_it_whole_finds() {
        let mut whole = SEGMENT_MAGIC.to_vec();
        for seq in 0..20u64 {
            let body = [
                &seq.to_le_bytes()[..],
                &1u16.to_le_bytes(),
                b"r",
                frame(seq).as_bytes(),
            ]
            .concat();
            whole.extend_from_slice(&(body.len() as u32).to_le_bytes());
            whole.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
            whole.extend_from_slice(&body);
        }
        let mut flipped = whole.clone();
        flipped[300] ^= 0x40;
        let mut huge_len = whole.clone();
        huge_len[SEGMENT_MAGIC.len()..SEGMENT_MAGIC.len() + 4]
            .copy_from_slice(&u32::MAX.to_le_bytes());
        let mut cases: Vec<Vec<u8>> = vec![flipped, huge_len, b"hello".to_vec(), Vec::new()];
        cases.extend(
            (0..=whole.len())
                .step_by(7)
                .map(|cut| whole[..cut].to_vec()),
        );
        let mut buf = Vec::new();
        for data in &cases {
            let mut want = Vec::new();
            let expected = parse_segment(data, &mut want);
            for chunk in [1, 5, 64, 1000, SEGMENT_READ_BYTES] {
                let mut got = Vec::new();
                let outcome = stream_records::<()>(&mut &data[..], chunk, &mut buf, &mut |r| {
                    got.push(r.to_record());
                    Ok(())
                });
                let Ok(outcome) = outcome else {
                    panic!("read failed")
                };
                assert_eq!(
                    (outcome, &got),
                    (expected, &want),
                    "chunk {chunk}, {} bytes",
                    data.len()
                );
            }
        }
    }

    #[test]
    fn the_oldest_segment_goes_with_exact_ranges_per_run() {
        let base = tmp("drop");
        let max = MIN_SEGMENT_BYTES * SEGMENTS_PER_SPOOL;
        let mut s = Spool::create(&base, "a", max).unwrap();
        let mut dropped = Vec::new();
        let mut kept_from = 0;
        for seq in 0..2_000u64 {
            let run = if seq % 3 == 0 { "b" } else { "a" };
            let got = s.append(run, seq, &frame(seq)).unwrap();
            dropped.extend(got);
            assert!(s.bytes() <= max);
            if seq == 1_999 {
                kept_from = s.records().unwrap()[0].seq;
            }
        }
        assert!(!dropped.is_empty());
        // Exactly the seqs before the oldest kept one were dropped, each counted once.
        let total: u64 = dropped.iter().map(|d| d.count).sum();
        assert_eq!(total, kept_from);
        assert_eq!(total + s.len(), 2_000);
        for d in &dropped {
            let expect = (d.from_seq..=d.to_seq)
                .filter(|q| (q % 3 == 0) == (d.run_id == "b"))
                .count() as u64;
            assert_eq!(d.count, expect, "{d:?}");
        }
        let _ = fs::remove_dir_all(base);
    }

    #[test]
    fn a_live_spool_is_not_left_a_released_one_is() {
        let base = tmp("left");
        let mut s = Spool::create(&base, "app", DEFAULT_SPOOL_MAX_BYTES).unwrap();
        s.append("r", 1, &frame(1)).unwrap();
        s.flush().unwrap();
        assert!(find_left(&base).is_empty(), "its owner holds it");
        let dir = s.dir().to_owned();
        drop(s);
        let left = find_left(&base);
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].dir, dir);
        assert_eq!(left[0].app.as_deref(), Some("app"));
        assert_eq!(left[0].pid, Some(u64::from(std::process::id())));
        assert!(find_left(&base).is_empty(), "held by the first finder");
        let (records, outcome) = left[0].records().unwrap();
        assert_eq!((records.len(), outcome.skipped_bytes), (1, 0));
        let mut each = Vec::new();
        let read = left[0]
            .each_record(|r| -> Result<(), SpoolError> {
                each.push(r.to_record());
                Ok(())
            })
            .unwrap();
        assert_eq!(
            (each, read),
            (records, outcome),
            "the same records, borrowed"
        );
        let one = left.into_iter().next().unwrap();
        one.remove().unwrap();
        assert!(!dir.exists());
        let _ = fs::remove_dir_all(base);
    }
}
