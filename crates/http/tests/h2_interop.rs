//! `h2::Connection` against a real HTTP/2 client: Debian's python3-h2, over a pipe
//! (`fixtures/h2_pipe_client.py`). The client's encoder, flow control and framing are not
//! ours, so this catches what hand-made frames cannot: HPACK as another implementation writes
//! it, WINDOW_UPDATE timing, frames split anywhere by the pipe.
//!
//! The server side here is the smallest one that uses the whole Connection API: answer each
//! GET with a body of `x`s, each POST with the count of body bytes once the body ended, under
//! the client's windows, crediting every body byte read. The same server on a loopback socket
//! answers curl and h2load (nghttp2, the library most clients build on).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ampd_http::h2::{Connection, Event, Limits, ResponseFields};
use ampd_http::Method;

/// A stream's answer, as far as it got.
struct Answer {
    body: Vec<u8>,
    sent: usize,
    headers_sent: bool,
    /// The request body ended (GET: at once): the answer may go out.
    ready: bool,
    received: usize,
    is_post: bool,
}

/// The test's server: the answers in the order their requests came.
struct Server {
    /// Bytes of each GET answer.
    get_body: usize,
    answers: HashMap<u32, Answer>,
    order: Vec<u32>,
    client_went_away: bool,
}

impl Server {
    fn new(get_body: usize) -> Server {
        Server {
            get_body,
            answers: HashMap::new(),
            order: Vec::new(),
            client_went_away: false,
        }
    }

    /// Act on the events; returns the body bytes to release per stream.
    fn on_events(&mut self, events: Vec<Event<'_>>) -> Vec<(u32, usize)> {
        let mut released = Vec::new();
        for event in events {
            match event {
                Event::Request { stream, head, .. } => {
                    let is_post = head.method == Method::Post;
                    let body = if is_post {
                        Vec::new()
                    } else {
                        vec![b'x'; self.get_body]
                    };
                    let answer = Answer {
                        body,
                        sent: 0,
                        headers_sent: false,
                        ready: !is_post,
                        received: 0,
                        is_post,
                    };
                    self.answers.insert(stream, answer);
                    self.order.push(stream);
                }
                Event::Data {
                    stream,
                    data,
                    end_stream,
                } => {
                    released.push((stream, data.len()));
                    let answer = self.answers.get_mut(&stream).expect("a known stream");
                    answer.received += data.len();
                    if end_stream {
                        answer.ready = true;
                        if answer.is_post {
                            answer.body = format!("got {} bytes", answer.received).into_bytes();
                        }
                    }
                }
                Event::Reset { stream, .. } => {
                    self.answers.remove(&stream);
                }
                Event::GoAway { .. } => self.client_went_away = true,
                Event::Refused { stream, status } => panic!("stream {stream} refused {status}"),
                Event::WindowOpened => {}
            }
        }
        released
    }

    /// HEADERS, then DATA as far as the client's windows allow, for every answer ready.
    fn send(&mut self, conn: &mut Connection, out: &mut Vec<u8>) {
        for stream in &self.order {
            let Some(answer) = self.answers.get_mut(stream) else {
                continue;
            };
            if !answer.ready {
                continue;
            }
            if !answer.headers_sent {
                let mut fields = ResponseFields::default();
                fields.status = 200;
                fields.push(b"content-length", answer.body.len().to_string().as_bytes());
                conn.write_headers(*stream, &fields, false, out);
                answer.headers_sent = true;
            }
            while answer.sent < answer.body.len() {
                let room = conn.send_capacity(*stream).min(conn.max_data_payload()) as usize;
                let len = room.min(answer.body.len() - answer.sent);
                if len == 0 {
                    break;
                }
                let end = answer.sent + len == answer.body.len();
                out.extend_from_slice(&conn.data_frame(*stream, len as u32, end));
                out.extend_from_slice(&answer.body[answer.sent..answer.sent + len]);
                answer.sent += len;
            }
        }
        self.answers
            .retain(|_, answer| !answer.ready || answer.sent < answer.body.len());
        self.order
            .retain(|stream| self.answers.contains_key(stream));
    }
}

/// Serve one TCP connection until the client closes it (or goes quiet for 10 s).
fn serve_tcp(mut socket: TcpStream) {
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut conn = Connection::new(&Limits::default());
    let mut server = Server::new(1_024);
    let mut out = Vec::new();
    let mut input = Vec::new();
    let mut buf = vec![0; 64 << 10];
    loop {
        conn.write_control(&mut out);
        server.send(&mut conn, &mut out);
        if socket.write_all(&out).is_err() || conn.is_closing() {
            return;
        }
        out.clear();
        let n = match socket.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        input.extend_from_slice(&buf[..n]);
        let mut events = Vec::new();
        let used = conn.receive(&input, Instant::now(), &mut events);
        let released = server.on_events(events);
        input.drain(..used);
        for (stream, len) in released {
            conn.release_body(stream, len);
        }
    }
}

/// A loopback listener serving each connection on its own thread; returns its port.
fn listen() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for socket in listener.incoming().flatten() {
            std::thread::spawn(move || serve_tcp(socket));
        }
    });
    port
}

/// Run a client program with a time bound; its stdout, or a panic with its stderr.
fn run(program: &str, args: &[&str], stdin: &[u8]) -> String {
    let mut child = Command::new("timeout")
        .arg("60")
        .arg(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("run {program}: {error}"));
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{program} {args:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn curl_gets_and_posts_over_h2c() {
    let port = listen();
    let url = format!("http://127.0.0.1:{port}/index.html");
    let body = run("curl", &["-sS", "--http2-prior-knowledge", &url], b"");
    assert_eq!(body, "x".repeat(1_024));
    // A body past every window: 16 x 64 KiB windows' worth.
    let upload = vec![b'u'; 1 << 20];
    let answer = run(
        "curl",
        &[
            "-sS",
            "--http2-prior-knowledge",
            "--data-binary",
            "@-",
            &url,
        ],
        &upload,
    );
    assert_eq!(answer, format!("got {} bytes", 1 << 20));
}

#[test]
fn h2load_completes_every_request_over_h2c() {
    let port = listen();
    let url = format!("http://127.0.0.1:{port}/");
    let report = run("h2load", &["-n", "2000", "-c", "2", "-m", "10", &url], b"");
    assert!(
        report.contains("2000 total, 2000 started, 2000 done, 2000 succeeded"),
        "{report}"
    );
}

#[test]
fn a_python_h2_client_gets_every_answer_through_the_connection() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h2_pipe_client.py");
    let mut child = Command::new("/usr/bin/python3")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run /usr/bin/python3 (Debian python3-h2)");
    let mut to_client = child.stdin.take().unwrap();
    let mut from_client = child.stdout.take().unwrap();
    let (chunks, incoming) = mpsc::channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let mut buf = [0; 4096];
        while let Ok(n @ 1..) = from_client.read(&mut buf) {
            if chunks.send(buf[..n].to_vec()).is_err() {
                return;
            }
        }
    });

    let limits = Limits {
        initial_window_size: 16_384,
        connection_window_size: 65_535,
        ..Limits::default()
    };
    let mut conn = Connection::new(&limits);
    let mut server = Server::new(5_000);
    let mut out = Vec::new();
    conn.write_control(&mut out);
    to_client.write_all(&out).unwrap();
    out.clear();

    let mut input = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    // Until the client exits (its stdout closes); bounded by the deadline.
    while let Ok(chunk) = incoming.recv_timeout(deadline.saturating_duration_since(Instant::now()))
    {
        input.extend_from_slice(&chunk);
        let mut events = Vec::new();
        let used = conn.receive(&input, Instant::now(), &mut events);
        assert!(!conn.is_closing(), "connection error");
        let released = server.on_events(events);
        input.drain(..used);
        for (stream, len) in released {
            conn.release_body(stream, len);
        }
        conn.write_control(&mut out);
        server.send(&mut conn, &mut out);
        if !out.is_empty() && to_client.write_all(&out).is_err() {
            break;
        }
        out.clear();
    }
    assert!(
        Instant::now() < deadline,
        "the exchange did not finish in time"
    );
    drop(to_client);
    let output = child.wait_with_output().expect("client exit");
    reader.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "client failed: {stderr}");
    assert!(stderr.contains("h2_pipe_client: ok"), "{stderr}");
    assert!(
        server.client_went_away,
        "the client's GOAWAY was not reported"
    );
    assert_eq!(conn.active_streams(), 0);
}
