# shellcheck shell=bash
# bench/nginx_conf.sh - sourced by run.sh and ab.sh: the nginx `return 200`
# both measure lockd against (the HTTP ceiling), with a small JSON body and
# the Lock-Lease header, so a client driving it like lockd finds a lease.
#   nginx_conf DIR PORT WORKERS   prints the configuration; temp files and the
#                                 pid go in DIR; WORKERS 0 = one process, no
#                                 master (its CPU is then one /proc entry)
nginx_conf() {
    local dir=$1 port=$2 workers=$3 master=on
    if ((workers == 0)); then
        master=off
        workers=1
    fi
    cat <<EOF
daemon off;
master_process $master;
worker_processes $workers;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $dir/cb; proxy_temp_path $dir/px;
    fastcgi_temp_path $dir/fc; uwsgi_temp_path $dir/uw; scgi_temp_path $dir/sc;
    keepalive_requests 100000000;
    server {
        listen 127.0.0.1:$port;
        location / {
            default_type application/json;
            add_header Lock-Lease 0123456789abcdef0123456789abcdef;
            return 200 '{"name":"x","fencing_token":1}';
        }
    }
}
EOF
}
