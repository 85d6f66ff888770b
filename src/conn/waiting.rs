//! A request held by its handler while a job runs for it (a path translation, a data load, a
//! FastCGI script's lookup, a password check), and where the connection goes once a handler
//! has done its part (`settle`).
//!
//! Owns: `Conn::job_done` for HTTP/1 connections, `Conn::settle`. Must not touch: the jobs
//! themselves (the engine runs them), what a handler does with its job (`handler/`).

use super::handler::Routed;
use super::{Conn, Context, Ending, Outcome, State};
use crate::content::job::{Job, JobDone};
use crate::response::Persistence;

impl Conn {
    /// A job this connection asked for finished. Returns the next job when serving needs one
    /// more (a path resolved to a small file whose data must now be loaded).
    pub fn job_done(&mut self, done: JobDone, context: &mut Context<'_>) -> Option<Job> {
        if let State::Http2(session) = &mut self.state {
            return session.job_done(done, context);
        }
        match std::mem::replace(&mut self.state, State::ReadingHead) {
            State::Handling(handler) => {
                let outcome = handler.job_done(done, &mut self.parts(), context);
                self.settle(outcome, context)
            }
            other => {
                self.state = other;
                None
            }
        }
    }

    /// Go where `outcome` says; the job the request needs next, if any.
    pub(super) fn settle(&mut self, outcome: Outcome, context: &mut Context<'_>) -> Option<Job> {
        match outcome {
            Outcome::Responded(Persistence::Close) => {
                self.state = State::Closing(self.ending());
                None
            }
            Outcome::Responded(_) => {
                self.state = State::ReadingHead;
                None
            }
            Outcome::NeedJob(job, handler) => {
                self.state = State::Handling(handler);
                Some(job)
            }
            Outcome::RespondedUnread => {
                self.state = State::Closing(Ending::Linger);
                None
            }
            Outcome::Admitted(routed) => {
                let Routed {
                    exchange,
                    route,
                    clean,
                    redirect,
                } = routed;
                self.after_access(exchange, route, clean, redirect, context)
            }
            Outcome::Wait(handler) => {
                self.state = State::Handling(handler);
                None
            }
            Outcome::RouteAgain {
                exchange,
                route,
                target,
            } => self.route_again(exchange, &route, target, false, context),
            Outcome::ScriptChecked(pending, resolved) => {
                let outcome = self.script_checked(*pending, &resolved.resolution, context);
                self.settle(outcome, context)
            }
            Outcome::Routed(job) => job,
            Outcome::ErrorPage(detour) => self.take_detour(*detour, context),
        }
    }
}
