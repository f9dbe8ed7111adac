# test/lib/common.sh — shared by test/run-tests.sh, test/run-demo.sh and
# the benchmarks: Debian packages, building, and throwaway PostgreSQL servers.
# Everything here runs as root; servers run as the postgres user.

# PAIDB_PG_ROOT: install paidb into a private copy of PostgreSQL under this
# directory (DESTDIR layout) instead of the system's, so that several
# checkouts can build and test side by side; empty means the system's.
PAIDB_PG_ROOT=${PAIDB_PG_ROOT:-}
PG_BIN=$PAIDB_PG_ROOT/usr/lib/postgresql/15/bin
# The checkout these scripts belong to, for tests that run in a copy without
# .git but need a release from its history (test/t/065_live_upgrade.pl
# builds release 0.2 from it).
PAIDB_CHECKOUT=${PAIDB_CHECKOUT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
export PAIDB_CHECKOUT
# Port reservations shared by every concurrent run of PostgreSQL::Test::Cluster.
export PG_TEST_PORT_DIR=${PG_TEST_PORT_DIR:-/tmp/paidb-portlock}
PAIDB_DEBS="postgresql-15 postgresql-server-dev-15 postgresql-contrib libcurl4-openssl-dev \
libjson-c-dev zlib1g-dev libyaml-dev libzstd-dev liblz4-dev pkg-config make gcc postgresql-15-pgtap \
libtap-parser-sourcehandler-pgtap-perl libipc-run-perl python3 openssl curl sqlsmith zstd"

# Install Debian packages (only those missing): paidb_install_debs PACKAGE...
paidb_install_debs() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
    done
    export DEBIAN_FRONTEND=noninteractive
    if [ ${#missing[@]} -gt 0 ]; then
        echo "== installing Debian packages: ${missing[*]}"
        apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
            || { echo "apt-get install failed" >&2; return 1; }
    fi
}

# Install the Debian packages paidb and its tests need (only what is missing).
paidb_install_packages() {
    paidb_install_debs $PAIDB_DEBS || return 1
    # kubectl: the machine's own if present, else Debian's kubernetes-client;
    # only the fake's kubectl tests need it, and they fail without it.
    if ! command -v kubectl >/dev/null 2>&1; then
        echo "== installing Debian's kubernetes-client (kubectl)"
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null; } \
            || echo "could not install kubectl; the kubectl tests will fail" >&2
    fi
    # Debian's postgresql package starts a cluster on 5432; we use our own.
    return 0
}

# Build and install the extension from $1 (the source tree).
paidb_build_install() {
    local src=$1
    echo "== building and installing paidb${PAIDB_PG_ROOT:+ into $PAIDB_PG_ROOT}"
    paidb_private_pg || return 1
    make -C "$src" -s -j2 >/dev/null || { make -C "$src"; return 1; }
    make -C "$src" -s install ${PAIDB_PG_ROOT:+DESTDIR="$PAIDB_PG_ROOT"} >/dev/null || return 1
    paidb_build_install_test_module "$src"
}

# Build and install the test-only module test/modules/paidb_test (the
# client's SQL hooks; never part of a release) from $1 [make variables...].
paidb_build_install_test_module() {
    local dir=$1/test/modules/paidb_test; shift
    make -C "$dir" -s -j2 "$@" >/dev/null || { make -C "$dir" "$@"; return 1; }
    make -C "$dir" -s install "$@" ${PAIDB_PG_ROOT:+DESTDIR="$PAIDB_PG_ROOT"} >/dev/null
}

# With PAIDB_PG_ROOT set: a private copy of the system's PostgreSQL 15 there
# (its binaries find share/ and lib/ relative to themselves).
paidb_private_pg() {
    [ -n "$PAIDB_PG_ROOT" ] || return 0
    [ -x "$PG_BIN/postgres" ] && return 0
    mkdir -p "$PAIDB_PG_ROOT/usr/lib/postgresql" "$PAIDB_PG_ROOT/usr/share/postgresql" || return 1
    cp -a /usr/lib/postgresql/15 "$PAIDB_PG_ROOT/usr/lib/postgresql/" &&
        cp -a /usr/share/postgresql/15 "$PAIDB_PG_ROOT/usr/share/postgresql/"
}

# A free TCP port on 127.0.0.1.
paidb_free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Start a throwaway PostgreSQL: paidb_start_pg DATADIR PORT [extra postgresql.conf lines...]
paidb_start_pg() {
    local data=$1 port=$2; shift 2
    rm -rf "$data"
    mkdir -p "$(dirname "$data")"
    chown postgres "$(dirname "$data")"
    su postgres -c "$PG_BIN/initdb -D '$data' -A trust -U postgres >/dev/null" || return 1
    {
        echo "port = $port"
        echo "listen_addresses = '127.0.0.1'"
        echo "unix_socket_directories = '$(dirname "$data")'"
        echo "fsync = off"
        for line in "$@"; do echo "$line"; done
    } >> "$data/postgresql.conf"
    su postgres -c "$PG_BIN/pg_ctl -D '$data' -l '$data.log' -w -t 60 start >/dev/null" || { cat "$data.log"; return 1; }
}

# Stop a throwaway PostgreSQL.
paidb_stop_pg() {
    su postgres -c "$PG_BIN/pg_ctl -D '$1' -m fast -w stop >/dev/null 2>&1" || true
}
