/* howl.c - the floor the socket API allows: an epoll server that parses nothing and answers
 * every request head it sees with the same pre-built response (the AFPA paper's "Howl").
 * bench/peers.sh measures it beside the real servers so their figures can be read against
 * what one core can do at best. Built by bench/setup.sh.
 *
 *   howl PORT BODY_BYTES [ADDRESS]     (ADDRESS defaults to 127.0.0.1)
 *
 * A request is counted at each blank line ending a head ("\r\n\r\n", found across reads too);
 * a head carrying "Connection: close" gets the response with that header, and the connection is
 * closed after it, so a client asking for one connection per request gets it. Request bodies
 * are not supported (benchmarks send GETs). Single-threaded, level-triggered, non-blocking.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_EVENTS 256
#define READ_SIZE 16384

struct conn {
    int fd;
    int matched;        /* bytes of "\r\n\r\n" matched at the end of the last read */
    int close_seen;     /* this head said Connection: close */
    char line[64];      /* the current header line's start, to find Connection: close */
    int line_len;
};

static char *keep_response, *close_response;
static size_t keep_len, close_len;

static char *build(const char *connection, size_t body, size_t *len) {
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nServer: howl\r\nContent-Type: application/octet-stream\r\n"
                     "Content-Length: %zu\r\n%s\r\n", body, connection);
    char *response = malloc((size_t)n + body);
    if (!response) { perror("malloc"); exit(1); }
    memcpy(response, head, (size_t)n);
    memset(response + n, 'x', body);
    *len = (size_t)n + body;
    return response;
}

/* Writes the whole response (blocking briefly on a full socket buffer: responses are small). */
static int send_all(int fd, const char *data, size_t len) {
    while (len > 0) {
        ssize_t sent = send(fd, data, len, MSG_NOSIGNAL);
        if (sent < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) { usleep(50); continue; }
            return -1;
        }
        data += sent;
        len -= (size_t)sent;
    }
    return 0;
}

/* Feeds one read's bytes; returns the number of complete heads, -1 to close after them. */
static int scan(struct conn *c, const char *data, ssize_t len, int *close_after) {
    static const char end[] = "\r\n\r\n";
    int heads = 0;
    for (ssize_t i = 0; i < len; i++) {
        char ch = data[i];
        if (ch == '\n') {
            c->line[c->line_len < 63 ? c->line_len : 63] = '\0';
            if (strncasecmp(c->line, "connection:", 11) == 0 && strcasestr(c->line + 11, "close"))
                c->close_seen = 1;
            c->line_len = 0;
        } else if (ch != '\r' && c->line_len < 63) {
            c->line[c->line_len++] = ch;
        }
        c->matched = (ch == end[c->matched]) ? c->matched + 1 : (ch == '\r' ? 1 : 0);
        if (c->matched == 4) {
            heads++;
            c->matched = 0;
            if (c->close_seen) { *close_after = 1; return heads; }
        }
    }
    return heads;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: howl PORT BODY_BYTES [ADDRESS]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    size_t body = (size_t)strtoul(argv[2], NULL, 10);
    const char *address = argc > 3 ? argv[3] : "127.0.0.1";
    keep_response = build("", body, &keep_len);
    close_response = build("Connection: close\r\n", body, &close_len);
    signal(SIGPIPE, SIG_IGN);

    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int on = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, address, &sa.sin_addr) != 1) {
        fprintf(stderr, "howl: bad address %s\n", address);
        return 2;
    }
    if (bind(listener, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(listener, 4096) < 0) {
        perror("howl: bind/listen");
        return 1;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
    struct epoll_event events[MAX_EVENTS];
    char buffer[READ_SIZE];

    for (;;) {
        int n = epoll_wait(ep, events, MAX_EVENTS, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            perror("howl: epoll_wait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (c == NULL) {
                int fd;
                while ((fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
                    struct conn *fresh = calloc(1, sizeof *fresh);
                    if (!fresh) { close(fd); continue; }
                    fresh->fd = fd;
                    struct epoll_event cev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = fresh};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
                }
                continue;
            }
            ssize_t got = recv(c->fd, buffer, sizeof buffer, 0);
            if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            int close_after = 0;
            int heads = got > 0 ? scan(c, buffer, got, &close_after) : 0;
            int failed = 0;
            for (int h = 0; h < heads && !failed; h++) {
                int last_and_close = close_after && h == heads - 1;
                failed = last_and_close ? send_all(c->fd, close_response, close_len)
                                        : send_all(c->fd, keep_response, keep_len);
            }
            if (got <= 0 || close_after || failed) {
                close(c->fd);   /* closing removes it from the epoll set */
                free(c);
            }
        }
    }
}
