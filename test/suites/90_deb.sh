# test/suites/90_deb.sh — the Debian package postgresql-15-paidb: built with
# dpkg-buildpackage (pg_buildext, debian/) in a copy of the tree, checked to
# hold everything `make install` installs, installed with dpkg on the
# system's PostgreSQL, and tested with make installcheck on a new cluster
# of the system's binaries.  Sourced by test/run-tests.sh.
#
# Installing the package writes the system's PostgreSQL directories, which
# run-tests.sh itself may have `make install`ed paidb into: the files the
# package replaces are saved first and put back after the package is
# purged, so the system is left as it was found.

deb_debs="debhelper postgresql-server-dev-all dpkg-dev"
deb_missing=()
for p in $deb_debs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || deb_missing+=("$p")
done
if [ ${#deb_missing[@]} -gt 0 ]; then
    echo "== installing Debian packages: ${deb_missing[*]}"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${deb_missing[@]}" >/dev/null; } \
        || echo "could not install ${deb_missing[*]}; the package suite will fail" >&2
fi

deb_pass=0
deb_fail=0
deb_ok() { if [ "$1" = 0 ]; then deb_pass=$((deb_pass + 1)); echo "ok - $2"; else deb_fail=$((deb_fail + 1)); echo "not ok - $2"; fi; }

deb_run() {
    local dir ver src deb sysbin=/usr/lib/postgresql/15/bin
    dir=$(mktemp -d /tmp/paidb-deb.XXXXXX)
    chmod 755 "$dir"
    ver=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Version)
    src="$dir/paidb-$ver"
    mkdir -p "$src"
    # the tree as a fresh clone has it
    if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
        (cd "$ROOT" && git ls-files -co --exclude-standard | while read -r f; do [ -e "$f" ] && echo "$f"; done \
            | tar -T - -cf -) | tar -C "$src" -xf -
    else
        tar -C "$ROOT" --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' --exclude=tmp_check \
            --exclude=results -cf - . | tar -C "$src" -xf -
    fi

    (cd "$src" && dpkg-buildpackage -us -uc -b) > "$dir/build.log" 2>&1
    deb_ok $? "dpkg-buildpackage -us -uc builds the package"
    deb=$(ls "$dir"/postgresql-15-paidb_"$ver"_*.deb 2>/dev/null | head -1)
    [ -n "$deb" ] || { tail -40 "$dir/build.log"; deb_ok 1 "the .deb exists"; return; }

    # everything make install installs is in the package (docs aside)
    mkdir -p "$dir/inst"
    make -C "$src" -s install DESTDIR="$dir/inst" PG_CONFIG=$sysbin/pg_config >/dev/null 2>&1
    (cd "$dir/inst" && find . -type f | sort) > "$dir/make-install.list"
    dpkg-deb -c "$deb" | awk '{print $6}' | grep -v '/$' | grep -v '^./usr/share/doc/' | sort > "$dir/deb.list"
    diff "$dir/make-install.list" "$dir/deb.list" > "$dir/list.diff"
    deb_ok $? "the package holds exactly what make install installs ($(wc -l < "$dir/deb.list") files)"
    [ -s "$dir/list.diff" ] && cat "$dir/list.diff"

    if dpkg-query -W -f='${Status}' postgresql-15-paidb 2>/dev/null | grep -q "ok installed"; then
        deb_ok 1 "postgresql-15-paidb was installed before the suite: not touching it"
        return
    fi
    # save what the package will overwrite (e.g. run-tests.sh's own make install)
    (cd / && sed 's|^\./||' "$dir/deb.list" | while read -r f; do [ -e "/$f" ] && echo "$f"; done) > "$dir/saved.list"
    tar -C / -cf "$dir/saved.tar" -T "$dir/saved.list" 2>/dev/null
    dpkg -i "$deb" > "$dir/dpkg.log" 2>&1
    deb_ok $? "dpkg -i installs it" || cat "$dir/dpkg.log"

    # make installcheck on a new cluster of the system's PostgreSQL
    local port data="$dir/pg/data"
    port=$(paidb_free_port)
    if (PG_BIN=$sysbin; paidb_start_pg "$data" "$port"); then
        chown -R postgres "$src"
        su postgres -c "cd '$src' && PGHOST=127.0.0.1 PGPORT=$port make -s installcheck PG_CONFIG=$sysbin/pg_config" > "$dir/installcheck.log" 2>&1
        local rc=$?
        grep -E '^(not )?ok|^test |^ *[a-z_]+ +\.\.\.|tests passed|failed' "$dir/installcheck.log"
        [ $rc = 0 ] || { [ -f "$src/regression.diffs" ] && head -100 "$src/regression.diffs"; }
        deb_ok $rc "make installcheck passes against the installed package"
        (PG_BIN=$sysbin; paidb_stop_pg "$data")
    else
        deb_ok 1 "a cluster of the system's PostgreSQL starts"
    fi

    # leave the system as it was found
    dpkg --purge postgresql-15-paidb > "$dir/purge.log" 2>&1
    deb_ok $? "dpkg --purge removes it" || cat "$dir/purge.log"
    [ -s "$dir/saved.list" ] && tar -C / -xf "$dir/saved.tar"
    local missing=0
    while read -r f; do [ -e "/$f" ] || missing=$((missing + 1)); done < "$dir/saved.list"
    deb_ok $missing "the files the package replaced are back ($(wc -l < "$dir/saved.list"))"
    rm -rf "$dir"
}

deb_run
add "$deb_pass" "$deb_fail" "Debian package"
