//! WebSocket through the proxy under every engine: with `websocket = true` the handshake is
//! passed on, the upstream's `101` comes back and frames flow both ways (text, binary of every
//! length encoding, ping/pong, close); without it the upgrade is refused (no `101`).

use crate::support;

use support::proxy::{self, location, pool};
use support::pyupstream::PyUpstream;
use support::websocket::{self, Handshake, BINARY, PING, PONG, TEXT};
use support::*;

for_each_arch!(fn websocket_echo_through_the_proxy_only_where_allowed(arch) {
    let root = TempRoot::new();
    let upstream = PyUpstream::start("py");
    let server = proxy::start(
        &root,
        arch,
        &pool("app", &[upstream.addr()], "read_timeout = \"5s\""),
        &format!(
            "{}{}",
            location("/live/", "app", "websocket = true"),
            location("/plain/", "app", "")
        ),
    );
    let Handshake::Open(mut client) = websocket::connect(server.addr(), "/live/ws") else {
        panic!("{arch}: the proxy did not pass the WebSocket handshake through");
    };
    client.echo(TEXT, b"hello through ampd");
    client.echo(BINARY, &(0..=255u8).collect::<Vec<_>>());
    client.echo(BINARY, &vec![0x5a; 70_000]);
    client.send(true, PING, b"are you there").unwrap();
    let pong = client.receive().unwrap();
    assert_eq!((pong.opcode, pong.payload.as_slice()), (PONG, &b"are you there"[..]));
    client.close();

    match websocket::connect(server.addr(), "/plain/ws") {
        Handshake::Refused(status, head) => assert_ne!(status, 101, "{head}"),
        Handshake::Open(_) => panic!("{arch}: upgraded where websocket = false"),
    }
    // Plain requests still work beside a tunnel.
    assert_eq!(get(server.addr(), "/plain/hello").status, 200);
});
