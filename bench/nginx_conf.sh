# nginx_conf.sh - the nginx configuration the bench scripts measure ampd against (sourced, not
# run): one worker, sendfile, an open-file cache and unlimited keep-alive, as every peer in
# bench/peers_lib.sh is configured.
#
# nginx_conf RUNDIR PORT ROOT HTTP_EXTRA [SERVER_EXTRA [LISTEN_OPTIONS]]: print the
# configuration. RUNDIR holds the pid file, the error log and nginx/ (temporary directories,
# writable by www-data); HTTP_EXTRA is what differs between scripts (the access log, `aio
# threads`), SERVER_EXTRA goes into the server block, LISTEN_OPTIONS after the listen address
# (`ssl`).
nginx_conf() {
  local run=$1 port=$2 root=$3 http_extra=$4 server_extra=${5:-} listen_options=${6:-}
  cat <<EOF
daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 65536;
user www-data;
pid $run/nginx.pid;
error_log $run/nginx.err warn;
events { worker_connections 4096; use epoll; multi_accept on; }
http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    $http_extra
    sendfile on; tcp_nopush on; tcp_nodelay on;
    keepalive_timeout 65; keepalive_requests 100000000;
    open_file_cache max=10000 inactive=60s; open_file_cache_valid 60s;
    server_tokens off;
    client_body_temp_path $run/nginx/body; proxy_temp_path $run/nginx/proxy;
    fastcgi_temp_path $run/nginx/fastcgi; uwsgi_temp_path $run/nginx/uwsgi;
    scgi_temp_path $run/nginx/scgi;
    server { listen 127.0.0.1:$port backlog=4096 $listen_options; root $root; $server_extra }
}
EOF
}
