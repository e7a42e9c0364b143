//! The worker's link side: connecting (hello), attaching (arming the gate engine from the
//! `hello.ack`, gap markers ahead of the spool and ring replay), retries with fast first
//! delays, and a failed link's accounting (what it never flushed is replayed).

use super::*;

impl Worker {
    /// Before a flush or the last delivery: a debugger never tried (the app ended before the
    /// first attempt) or due for a retry is tried now, so a short script's ring is not
    /// given up on. Bounded by the connect and handshake timeouts.
    pub(super) fn connect_to_deliver(&mut self) {
        let due = !self.tried || self.next_attempt.is_some_and(|at| at <= Instant::now());
        if self.link.is_none() && due {
            self.attempt();
        }
    }

    /// Takes over the events dropped at the hand-off into the ring's loss accounting, warns
    /// with the real total, and, attached, sends the gap markers at once.
    pub(super) fn take_handoff_loss(&mut self) {
        if !self.inner().handoff_lost.swap(false, Ordering::AcqRel) {
            return;
        }
        let loss = std::mem::take(&mut self.session.inner.shared.lock().handoff_loss);
        if loss.is_empty() {
            return;
        }
        self.buffer.absorb_loss(loss);
        let lost = self.buffer.stats().lost;
        self.inner().warner.warn(
            "handoff-loss",
            &format!(
                "dropped events because the app outran the GraphMind worker ({lost} lost so far in this session); \
                 the recorded run is incomplete and its gap marker says which seqs are missing"
            ),
        );
        if self.link.is_some() {
            self.send_gap_markers();
        }
    }

    /// The end of a dark period, in the host's log with the real count: the first loss only
    /// warned "dropped 1 event", the markers just sent name every one.
    pub(super) fn warn_gaps_sent(&self, gaps: &[buffer::PendingGap]) {
        let lost: u64 = gaps.iter().map(|g| g.dropped_count).sum();
        if lost == 0 {
            return;
        }
        let ranges: Vec<String> = gaps
            .iter()
            .take(3)
            .map(|g| {
                format!(
                    "{}: {} (seq {}-{})",
                    g.run_id, g.dropped_count, g.from_seq, g.to_seq
                )
            })
            .collect();
        let more = if gaps.len() > 3 {
            format!(" and {} more runs", gaps.len() - 3)
        } else {
            String::new()
        };
        self.inner().warner.warn(
            &format!("gaps-sent:{}", epoch_ms()),
            &format!(
                "{lost} event{} never reached the debugger; the gap markers just sent name them ({}{more})",
                if lost == 1 { "" } else { "s" },
                ranges.join(", ")
            ),
        );
    }

    /// Sends one gap marker per run that lost events, each with a fresh seq (attached).
    pub(super) fn send_gap_markers(&mut self) {
        let gaps = self.buffer.take_gaps();
        if gaps.is_empty() {
            return;
        }
        let markers: Vec<String> = {
            let mut shared = self.session.inner.shared.lock();
            gaps.iter()
                .map(|gap| {
                    let frame = gap.marker(shared.seq, epoch_ms());
                    shared.seq += 1;
                    frame
                })
                .collect()
        };
        let Some(link) = self.link.as_mut() else {
            self.buffer.restore_gaps(gaps);
            return;
        };
        if markers.into_iter().all(|frame| link.queue(frame).is_ok()) {
            self.warn_gaps_sent(&gaps);
        } else {
            self.buffer.restore_gaps(gaps);
            self.link_failed();
        }
    }

    pub(super) fn flush_link(&mut self) {
        if let Some(link) = self.link.as_mut() {
            if link.flush().is_err() {
                self.link_failed();
            } else {
                self.unflushed = 0;
            }
        }
    }

    pub(super) fn link_failed(&mut self) {
        // What the failed link never flushed is replayed (or, evicted, counted as lost).
        self.buffer.mark_undelivered_newest(self.unflushed);
        self.unflushed = 0;
        let generation = self.session.inner.shared.lock().link_generation;
        if let Some(link) = self.link.take() {
            link.abort();
        }
        self.session.handle_detached(generation);
        self.schedule_retry(true);
    }

    pub(super) fn schedule_retry(&mut self, was_attached: bool) {
        let interval = millis(self.inner().config.retry_interval_ms);
        if was_attached {
            self.fast_retry = 0;
        }
        let delay = if self.fast_retry < FAST_RETRY_DELAYS.len() {
            let d = FAST_RETRY_DELAYS[self.fast_retry].min(interval);
            self.fast_retry += 1;
            d
        } else {
            interval
        };
        self.next_attempt = Some(Instant::now() + delay);
    }

    pub(super) fn hello(&self) -> String {
        let token = self.session.inner.shared.lock().session_token.clone();
        let config = &self.inner().config;
        let capabilities: Vec<JsStr> = KNOWN_CAPABILITIES
            .iter()
            .filter(|c| config.edit_input || **c != "edit-input")
            .map(|c| JsStr::from(*c))
            .collect();
        let mut hello = Hello::new(CLIENT_VERSION, capabilities);
        hello.app = Some(config.app_name.as_str().into());
        hello.sdk = Some(SdkInfo::new(
            config.sdk.name.as_str(),
            config.sdk.version.as_str(),
        ));
        hello.resume_token = token.map(JsStr::from);
        hello.encode(0, epoch_ms(), WILDCARD_RUN_ID)
    }

    pub(super) fn attempt(&mut self) {
        self.tried = true;
        let hello = self.hello();
        let result = self.inner().connector.connect(&hello);
        let config = &self.inner().config;
        match result {
            Ok(link) => self.attached(link),
            Err(error) => {
                let key = match &error {
                    transport::TransportError::VersionMismatch { .. } => "transport-version",
                    _ => "transport-connect",
                };
                let message = format!(
                    "not attached to the debugger at {} ({error}); staying detached, retrying in the background",
                    config.url
                );
                self.inner().warner.warn(key, &message);
                self.schedule_retry(false);
            }
        }
    }

    pub(super) fn attached(&mut self, link: transport::Link) {
        let transport::Link {
            reader,
            mut writer,
            ack,
        } = link;
        let breakpoints: Vec<BreakpointMatcher> = ack
            .get("breakpoints")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(BreakpointMatcher::from_value)
                    .collect()
            })
            .unwrap_or_default();
        let mode = ack
            .get("mode")
            .and_then(Value::as_str)
            .and_then(RunMode::parse)
            .unwrap_or_default();
        let hub = ack
            .get("hubCapabilities")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect::<Vec<_>>()
            });
        let mut generation = 0;
        self.take_handoff_loss();
        let gaps = self.buffer.take_gaps();
        let mut markers = Vec::with_capacity(gaps.len());
        let disposed;
        {
            let mut shared = self.session.inner.shared.lock();
            // A disposed session attaches only for its last delivery (see
            // `connect_to_deliver`): gap markers and the ring go out, nothing is armed and no
            // reader listens.
            disposed = shared.disposed;
            if !disposed {
                if let Some(token) = ack
                    .get("sessionToken")
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                {
                    shared.session_token = Some(token.to_string());
                }
                shared.hub_capabilities = hub;
                shared.engine.arm(breakpoints, mode);
                shared.engine_attached = true;
                shared.link_generation += 1;
                generation = shared.link_generation;
            }
            // Gap markers take fresh seqs, ahead of the replay (what they describe is older).
            for gap in &gaps {
                markers.push(gap.marker(shared.seq, epoch_ms()));
                shared.seq += 1;
            }
            if !disposed {
                self.session.inner.attached.store(true, Ordering::Release);
                self.session.inner.attach_signal.notify_all();
            }
        }
        let mut ok = markers.into_iter().all(|frame| writer.queue(frame).is_ok());
        let spooled = if ok {
            self.spooler.pending(&self.session.inner.warner)
        } else {
            Vec::new()
        };
        let had_spool = !spooled.is_empty();
        if ok && had_spool {
            ok = spooled.into_iter().all(|r| writer.queue(r.frame).is_ok());
        }
        let replayed = self.buffer.frames().len();
        if ok {
            ok = self
                .buffer
                .frames()
                .map(str::to_string)
                .collect::<Vec<_>>()
                .into_iter()
                .all(|f| writer.queue(f).is_ok());
        }
        ok = ok && writer.flush().is_ok();
        if !ok {
            self.buffer.restore_gaps(gaps);
            writer.abort();
            if disposed {
                return;
            }
            self.session.handle_detached(generation);
            self.schedule_retry(true);
            return;
        }
        self.buffer.mark_delivered(replayed);
        if had_spool {
            self.spooler
                .replayed(&mut self.buffer, &self.session.inner.warner);
        }
        self.warn_gaps_sent(&gaps);
        self.link = Some(writer);
        self.fast_retry = FAST_RETRY_DELAYS.len();
        self.next_attempt = None;
        if disposed {
            return;
        }
        let session = self.session.clone();
        let spawned = std::thread::Builder::new()
            .name("graphmind-reader".into())
            .spawn(move || read_loop(session, reader, generation));
        if spawned.is_err() {
            self.link_failed();
        }
    }

    pub(super) fn publish_stats(&self) {
        let stats = self.buffer.stats();
        let inner = self.inner();
        inner
            .buffered
            .store(stats.buffered as u64, Ordering::Relaxed);
        inner.dropped.store(stats.dropped, Ordering::Relaxed);
        inner.lost.store(stats.lost, Ordering::Relaxed);
        inner
            .pending_gaps
            .store(stats.pending_gaps as u64, Ordering::Relaxed);
        inner.spooled.store(self.spooler.len(), Ordering::Relaxed);
    }
}
