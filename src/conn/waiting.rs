//! A request held while a job runs for it (a path translation, a data load, a FastCGI
//! script's lookup, a password check): what the job's result does with it, and where the
//! connection goes once a request is answered (`settle`).
//!
//! Owns: `Conn::job_done` for HTTP/1 connections. Must not touch: the jobs themselves (the
//! engine runs them), what a static response is (`handler/static_files.rs`).

use std::sync::Arc;

use super::{Conn, Context, Outcome, Pending, State};
use crate::content::file::Resolution;
use crate::content::job::{Job, JobDone};
use crate::content::sink::DiskAccess;
use crate::response::Persistence;

impl Conn {
    /// A job this connection asked for finished. Returns the next job when serving needs one
    /// more (a path resolved to a small file whose data must now be loaded).
    pub fn job_done(&mut self, done: JobDone, context: &mut Context<'_>) -> Option<Job> {
        if let State::Http2(session) = &mut self.state {
            return session.job_done(done, context);
        }
        let pending = match std::mem::replace(&mut self.state, State::ReadingHead) {
            State::Waiting(pending) => pending,
            State::Authenticating(request) => {
                let JobDone::Verified(matched) = done else {
                    self.state = State::Authenticating(request);
                    return None;
                };
                return self.authenticated(*request, matched, context);
            }
            other => {
                self.state = other;
                return None;
            }
        };
        let outcome = match done {
            JobDone::Resolved(resolved) => {
                if matches!(resolved.resolution, Resolution::Exhausted) {
                    // Out of descriptors: close cached files and translate once more before
                    // answering 503.
                    context.caches.relieve("open");
                    if let (false, Some(root)) = (pending.retried, pending.root().cloned()) {
                        let job = Job::Resolve {
                            root,
                            path: pending.path.clone(),
                            watcher: context.caches.watcher.clone(),
                            previous: None,
                        };
                        let pending = Pending {
                            retried: true,
                            ..*pending
                        };
                        return self.settle(Outcome::NeedJob(job, Box::new(pending)));
                    }
                }
                let resolved = Arc::new(resolved);
                if let Some(root) = pending.root() {
                    context
                        .caches
                        .remember(root.id, pending.path.as_str(), &resolved);
                }
                if pending.script.is_some() {
                    self.script_checked(*pending, &resolved.resolution, context)
                } else {
                    let disk = context.disk;
                    self.respond(*pending, resolved, context, disk)
                }
            }
            JobDone::Loaded { file, data } => {
                let resolved = pending.resolved.clone()?;
                if let Ok(data) = data {
                    context.caches.remember_data(file.key, data, resolved.watch);
                }
                // The data was just read, so its pages are resident: serving inline now cannot
                // block for long, and cannot ask for the same load again.
                self.respond(*pending, resolved, context, DiskAccess::Inline)
            }
            // Page-ins are the engine's business (they serve output already queued); a
            // verification belongs to `Authenticating`; batches are an HTTP/2 session's.
            JobDone::PagedIn { .. } | JobDone::Verified(_) | JobDone::Batch(_) => {
                self.state = State::Waiting(pending);
                return None;
            }
        };
        self.settle(outcome)
    }

    pub(super) fn settle(&mut self, outcome: Outcome) -> Option<Job> {
        match outcome {
            Outcome::Responded(Persistence::Close) => {
                self.state = State::Closing(self.ending());
                None
            }
            Outcome::Responded(_) => {
                self.state = State::ReadingHead;
                None
            }
            Outcome::NeedJob(job, pending) => {
                self.state = State::Waiting(pending);
                Some(job)
            }
            Outcome::Routed(job) => job,
        }
    }
}
