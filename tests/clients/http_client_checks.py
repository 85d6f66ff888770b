#!/usr/bin/env python3
"""Drives ampd with Python's http.client; exits non-zero (via assert) on any mismatch.

Usage: http_client_checks.py HOST PORT
Expects the document root made by tests/it/real_clients.rs: index.html, data.bin (bytes 0..255
repeated to 4096 bytes), dir/index.html.
"""

import http.client
import sys


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    data = bytes(range(256)) * 16
    conn = http.client.HTTPConnection(host, port, timeout=10)

    # Several requests on one persistent connection.
    for _ in range(5):
        conn.request("GET", "/index.html")
        response = conn.getresponse()
        body = response.read()
        assert response.status == 200, response.status
        assert body == b"<h1>python</h1>", body
        assert response.getheader("Content-Type") == "text/html; charset=utf-8"
        assert response.getheader("Server") == "ampd"
        assert not response.will_close, "HTTP/1.1 keep-alive expected"

    conn.request("HEAD", "/data.bin")
    response = conn.getresponse()
    assert response.read() == b""
    assert response.getheader("Content-Length") == str(len(data))
    etag = response.getheader("ETag")
    assert etag and etag.startswith('"'), etag

    conn.request("GET", "/data.bin", headers={"Range": "bytes=100-199"})
    response = conn.getresponse()
    assert response.status == 206, response.status
    assert response.read() == data[100:200]
    assert response.getheader("Content-Range") == "bytes 100-199/%d" % len(data)

    conn.request("GET", "/data.bin", headers={"If-None-Match": etag})
    response = conn.getresponse()
    assert response.status == 304, response.status
    assert response.read() == b""

    conn.request("GET", "/dir")
    response = conn.getresponse()
    response.read()
    assert response.status == 301
    assert response.getheader("Location") == "/dir/"

    conn.request("GET", "/dir/")
    response = conn.getresponse()
    assert response.read() == b"dir index"

    conn.request("POST", "/index.html", body=b"x=1")
    response = conn.getresponse()
    response.read()
    assert response.status == 405
    assert response.getheader("Allow") == "GET, HEAD, OPTIONS"

    conn.request("GET", "/missing")
    response = conn.getresponse()
    response.read()
    assert response.status == 404

    conn.request("GET", "/data.bin", headers={"Connection": "close"})
    response = conn.getresponse()
    assert response.read() == data
    assert response.will_close
    conn.close()
    print("http.client checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
