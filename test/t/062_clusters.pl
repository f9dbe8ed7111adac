# Many clusters from one database (SPEC §11), against four kube-fakes (one
# process per cluster, each wanting its own bearer token) and one node whose
# paidb.k8s_* settings point at fake A (the "default" cluster):
#  1. clusters B and C inserted at run time each get their own sync,
#     framework watcher and event watcher within seconds, without touching
#     the default cluster's workers;
#  2. placement: by the cluster argument, by the job's virtual cluster
#     (paidb.virtual_cluster_placement), by paidb.default_cluster, and by
#     default; each framework is created only in its cluster's API server,
#     carries paidb.io/placement "1", and the job runs to SUCCEEDED;
#  3. refusals: an unknown cluster (22023), a cordoned one (55000), another
#     cluster for an existing job (55000, hint paidb.move_job), nothing
#     stored; cordoning and uncordoning restart no worker, and a cordoned
#     cluster's running job still completes;
#  4. changing B's api_server, then its token_file, restarts B's three
#     workers only; a job running in B across the change is neither created
#     again nor lost, and a new one goes through;
#  5. remove_cluster('c') is refused (55000, naming the number of jobs)
#     while C has a live job, allowed once the job is completed and deleted
#     from the API server; C's workers exit, nobody else's restart, and C
#     takes no new job;
#  6. retain mode per cluster: an orphan framework in B (retain_mode true)
#     is kept, one in D (retain_mode false) is deleted;
#  7. no request about a job ever reaches another cluster's API server, and
#     a framework of the same name appearing in another cluster never
#     changes the job (and is deleted there by that cluster's sync worker).
# Every wait polls with a deadline; "nothing restarted" is checked after a
# change that the launcher must have seen (a barrier), not after a sleep.
use strict;
use warnings;
use Cwd qw(abs_path);
use File::Copy qw(copy);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use KubeFake;
use PaidbTest;

my $json = JSON::PP->new->canonical->allow_nonref;

# ---------------------------------------------------------------- set-up

# One fake per cluster, each with its own token: a worker that talked to a
# cluster with another cluster's token would get 401s, not frameworks.
my (%fake, %token_file);
for my $c ('a', 'b', 'c', 'd')
{
	(undef, $token_file{$c}) = PaidbTest::new_token("paidb-060-$c-");
	$fake{$c} = PaidbTest::start_fake(token_file => $token_file{$c}, args => [ '--log-name', '--log-agent' ]);
}
# the cluster name of each fake: fake A serves the default cluster
my %cluster_of = (a => 'default', b => 'b', c => 'c', d => 'd');

my $node = PaidbTest::start_node('clusters', $fake{a}, token_file => $token_file{a},
	retain_mode => 'on', conf => "max_worker_processes = 24\n");

# A text value as an SQL literal (NULL for undef).
sub lit { return PaidbTest::sql_literal(@_); }

# The SQL of a submission with a cluster argument (undef: NULL).
sub submit_sql
{
	my ($req, $cluster) = @_;
	return 'SELECT name, request_generation, created, changed FROM paidb.put_framework_request('
	  . sql_json($req) . ", now(), '{}'::jsonb, " . lit($cluster) . ')';
}

# Submit with a cluster argument: {name, request_generation, created,
# changed}, or {} after a diag when it failed (the checks on it then fail).
sub submit_to
{
	my ($req, $cluster) = @_;
	my ($out, $err) = ('', '');
	my $ret = $node->psql('postgres', submit_sql($req, $cluster), stdout => \$out, stderr => \$err);
	if ($ret != 0)
	{
		diag("submitting $req->{metadata}{name} to cluster " . ($cluster // 'NULL') . " failed: $err");
		return {};
	}
	my ($name, $gen, $created, $changed) = split /\|/, $out;
	return { name => $name, request_generation => $gen, created => $created, changed => $changed };
}

# Submit with a cluster argument without dying: (psql exit code, stderr),
# the error with its SQLSTATE (VERBOSITY verbose).
sub try_submit_to
{
	my ($req, $cluster) = @_;
	my ($out, $err) = ('', '');
	my $ret = $node->psql('postgres', "\\set VERBOSITY verbose\n" . submit_sql($req, $cluster),
		stdout => \$out, stderr => \$err);
	return ($ret, $err);
}

# Run SQL without dying: (psql exit code, stderr with SQLSTATE).
sub try_sql
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $ret = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql", stdout => \$out, stderr => \$err);
	return ($ret, $err);
}

# A cluster's workers in status(): "event watcher=PID,framework watcher=PID,sync=PID".
sub pids_of
{
	my ($cluster) = @_;
	return query($node, q{SELECT coalesce(string_agg(worker || '=' || coalesce(pid::text, '-'), ',' ORDER BY worker), '')
	    FROM paidb.status() WHERE cluster = } . lit($cluster));
}

# The workers of every cluster now: {cluster => pids_of}.
sub all_pids
{
	my %out;
	$out{$_} = pids_of($_) for values %cluster_of;
	return \%out;
}

# The pids in a pids_of string.
sub pid_list
{
	my ($s) = @_;
	return grep { /^\d+$/ } map { (split /=/)[1] // '' } split /,/, $s;
}

# Wait until a cluster has exactly its three workers, each a live backend,
# both watchers watching; with $old (a pids_of string), until none of them
# has one of the old pids.
sub wait_cluster_workers
{
	my ($cluster, $old, $secs) = @_;
	my @old = pid_list($old // '');
	my $not_old = @old ? ' AND s.pid NOT IN (' . join(', ', @old) . ')' : '';
	return poll($node, qq{SELECT count(*) = 3
	    AND count(DISTINCT worker) = 3
	    AND bool_and(s.worker IN ('sync', 'framework watcher', 'event watcher'))
	    AND bool_and(s.pid IS NOT NULL
	        AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = s.pid)
	        AND (s.worker = 'sync' OR s.state = 'watching')$not_old)
	  FROM paidb.status() s WHERE s.cluster = } . lit($cluster), 't', $secs);
}

# Compare every cluster's pids with a saved all_pids, except the clusters
# named in $changed (which must have changed).
sub pids_unchanged
{
	my ($before, $what, @changed) = @_;
	my $now = all_pids();
	my %skip = map { $_ => 1 } @changed;
	for my $c (sort keys %$before)
	{
		next if $skip{$c};
		# three workers with pids, the same three
		ok(pid_list($before->{$c}) == 3 && $now->{$c} eq $before->{$c},
			"$what: the three workers of cluster $c kept their pids")
		  or diag("before: $before->{$c}, now: $now->{$c}");
	}
	for my $c (@changed)
	{
		my %was = map { $_ => 1 } pid_list($before->{$c});
		my @now = pid_list($now->{$c});
		ok(@now == 3 && !grep({ $was{$_} } @now), "$what: cluster $c has three new workers")
		  or diag("before: $before->{$c}, now: $now->{$c}");
	}
	return;
}

# Wait until a cluster's framework watcher has passed everything its fake
# holds now (bookmarks bring it there even without a framework event).
sub watcher_passed
{
	my ($cluster, $fk) = @_;
	my $rv = $fk->resource_version;
	return poll($node, "SELECT resource_version::text::bigint >= $rv FROM paidb.cluster_status WHERE cluster = "
		  . lit($cluster));
}

# Lift a kube-fake hold-state annotation: the framework runs on to its end.
sub release { return PaidbTest::fake_release_hold(@_); }

# The same token in a new file (an absolute path: the server's working
# directory is its data directory).
sub copy_token
{
	my ($file) = @_;
	my $copy = abs_path(PostgreSQL::Test::Utils::tempdir()) . '/token-copy';
	copy($file, $copy) or die "copying $file: $!";
	chmod 0600, $copy;
	return $copy;
}

# A framework as paidb would have created it, for creating one directly in a fake.
sub paidb_like
{
	my ($name, %o) = @_;
	my $fw = job_request($name, %o);
	$fw->{metadata}{labels}{'paidb.io/framework'} = $name;
	$fw->{metadata}{labels}{'paidb.io/placement'} = '1';
	$fw->{metadata}{annotations}{requestGeneration} = '1';
	return $fw;
}

# Requests paidb sent to a fake about one framework name (from the fake's
# request log, started with --log-name and --log-agent: a create names its
# object, and paidb's User-Agent tells its requests from the test's own).
sub touched
{
	my ($fk, $name) = @_;
	my $n = 0;
	open(my $fh, '<', $fk->{request_log}) or return 0;
	while (my $line = <$fh>)
	{
		next unless $line =~ m{^\S+ (\S+) (\S+) \S+ \S+ms(?: name=(\S+))?(?: agent=(.*))?$};
		my ($target, $created, $agent) = ($2, $3, $4 // '');
		next unless $agent =~ m{^paidb/};
		$n++ if ($created // '') eq $name || $target =~ m{/frameworks/\Q$name\E(?:[/?]|$)};
	}
	close($fh);
	return $n;
}

# Where each job was placed: name => fake key.
my %placed;

# Wait for a job to be SUCCEEDED and deleted from its API server.
sub succeeded
{
	my ($name) = @_;
	return poll($node, "SELECT state = 'SUCCEEDED' AND api_server_deleted FROM paidb.framework WHERE name = " . lit($name));
}

# A job is created once in its own fake and never in any other.
sub created_only_in
{
	my ($name, $key) = @_;
	is(fake_creates($fake{$key}, $name), 1, "$name: its framework was created once, in fake " . uc($key));
	for my $other (grep { $_ ne $key } sort keys %fake)
	{
		is(fake_create_attempts($fake{$other}, $name), 0, "$name: no create in fake " . uc($other));
	}
	return;
}

# ============================================================ 0. the default cluster
is(query($node, q{SELECT string_agg(name || ' ' || state || ' '
        || (api_server IS NULL AND namespace IS NULL AND token_file IS NULL AND ca_file IS NULL AND retain_mode IS NULL), ',')
    FROM paidb.cluster}),
	'default active true', 'paidb.cluster holds the row "default", active, all NULL (the settings)');
ok(wait_cluster_workers('default'), 'the default cluster has its three workers');

# ============================================================ 1. clusters inserted at run time
my $pids_default0;
{
	$pids_default0 = pids_of('default');
	$node->safe_psql('postgres', sprintf(q{INSERT INTO paidb.cluster (name, api_server, token_file, namespace, retain_mode)
	    VALUES ('b', %s, %s, 'default', true), ('c', %s, %s, 'default', NULL)},
		lit($fake{b}->url), lit($token_file{b}), lit($fake{c}->url), lit($token_file{c})));
	ok(wait_cluster_workers('b', undef, 30), 'cluster b gets its sync, framework watcher and event watcher within 30 s');
	ok(wait_cluster_workers('c', undef, 30), 'cluster c gets its three workers within 30 s');
	my %pb = map { $_ => 1 } pid_list(pids_of('b'));
	ok(!grep({ $pb{$_} } pid_list(pids_of('c'))) && !grep({ $pb{$_} } pid_list($pids_default0)),
		"b's workers are processes of their own");
	is(pids_of('default'), $pids_default0, "the default cluster's workers were not restarted");
	ok(poll($node, q{SELECT string_agg(cluster || ':' || state || ':' || workers, ',' ORDER BY cluster)
	        FROM paidb.cluster_status}, 'b:active:3,c:active:3,default:active:3'),
		'cluster_status: three running workers per cluster');
	# both watchers of b and c have listed their fake (with their tokens)
	cmp_ok(fake_counter($fake{$_}, 'list frameworks'), '>=', 1, "fake " . uc($_) . " was listed") for qw(b c);
	is(query($node, q{SELECT count(*) FROM paidb.status() WHERE cluster IS NULL AND pid IS NOT NULL
	        AND worker IN ('sync', 'framework watcher', 'event watcher')}), '0',
		'every sync and watcher row of status() names its cluster');
}

# ============================================================ 2. placement
{
	$node->safe_psql('postgres', q{INSERT INTO paidb.virtual_cluster_placement (virtual_cluster, cluster) VALUES ('vcc', 'c')});

	# by argument, by virtual cluster, argument over virtual cluster, by default;
	# held running so their frameworks can be looked at
	my $pb = job_request('placeb', hold_state => 'AttemptRunning');
	my $pc = job_request('placec', hold_state => 'AttemptRunning');
	$pc->{metadata}{labels}{virtualCluster} = 'vcc';
	my $pbx = job_request('placebx', hold_state => 'AttemptRunning');
	$pbx->{metadata}{labels}{virtualCluster} = 'vcc';
	my $pa = job_request('placea', hold_state => 'AttemptRunning');

	is(submit_to($pb, 'b')->{created}, 't', 'a job submitted with cluster b is created');
	is(submit($node, $pc)->{created}, 't', 'a job of virtual cluster vcc is created without a cluster argument');
	submit_to($pbx, 'b');
	submit($node, $pa);
	%placed = (placeb => 'b', placec => 'c', placebx => 'b', placea => 'a');
	is(query($node, q{SELECT string_agg(name || ':' || cluster || ':' || placement || ':' || virtual_cluster, ',' ORDER BY name)
	        FROM paidb.framework WHERE name LIKE 'place%'}),
		'placea:default:1:default,placeb:b:1:default,placebx:b:1:vcc,placec:c:1:vcc',
		'placement: argument b, virtual cluster vcc -> c, the argument over vcc, else default');

	for my $name (sort keys %placed)
	{
		my $key = $placed{$name};
		ok(poll($node, "SELECT state = 'RUNNING' FROM paidb.framework WHERE name = '$name'"), "$name runs");
		my $fw = fake_framework($fake{$key}, $name);
		ok($fw, "$name: its framework is in fake " . uc($key));
		my $labels = ($fw // {})->{metadata}{labels} // {};
		is($json->encode($labels->{'paidb.io/placement'}), '"1"', "$name: label paidb.io/placement is the string \"1\"");
		is($labels->{'paidb.io/framework'}, $name, "$name: label paidb.io/framework is kept");
		for my $other (grep { $_ ne $key } sort keys %fake)
		{
			ok(!fake_framework($fake{$other}, $name), "$name: not in fake " . uc($other));
		}
	}
	for my $name (sort keys %placed)
	{
		is(release($fake{ $placed{$name} }, $name), 200, "$name: hold lifted");
	}
	for my $name (sort keys %placed)
	{
		ok(succeeded($name), "$name runs to SUCCEEDED and its framework is deleted");
		created_only_in($name, $placed{$name});
	}

	# paidb.default_cluster: a job whose virtual cluster has no placement
	$node->append_conf('postgresql.conf', "paidb.default_cluster = 'c'\n");
	$node->reload;
	ok(poll($node, q{SELECT current_setting('paidb.default_cluster') = 'c'}), 'paidb.default_cluster is c by reload');
	submit($node, job_request('placedefc'));
	$placed{placedefc} = 'c';
	is(query($node, q{SELECT cluster FROM paidb.framework WHERE name = 'placedefc'}), 'c',
		'a job of an unplaced virtual cluster goes to paidb.default_cluster');
	ok(succeeded('placedefc'), 'placedefc runs to SUCCEEDED in cluster c');
	created_only_in('placedefc', 'c');
	$node->append_conf('postgresql.conf', "paidb.default_cluster = 'default'\n");
	$node->reload;
	ok(poll($node, q{SELECT current_setting('paidb.default_cluster') = 'default'}), 'paidb.default_cluster back to default');
}

# ============================================================ 3. refusals, cordon
{
	# unknown cluster
	my ($ret, $err) = try_submit_to(job_request('unknown3'), 'nosuch');
	isnt($ret, 0, 'a job for an unknown cluster is refused');
	like($err, qr/ERROR:\s+22023/, 'unknown cluster: SQLSTATE 22023');
	is(query($node, q{SELECT count(*) FROM paidb.framework WHERE name = 'unknown3'}), '0', 'nothing is stored');

	# another cluster for an existing job (its own, and NULL, are fine)
	my $row_a = query($node, q{SELECT cluster || ' ' || placement || ' ' || request_generation || ' ' || xmin
	    FROM paidb.framework WHERE name = 'placea'});
	my $pa = job_request('placea', hold_state => 'AttemptRunning');
	($ret, $err) = try_submit_to($pa, 'c');
	isnt($ret, 0, 'an existing job submitted again for another cluster is refused');
	like($err, qr/ERROR:\s+55000/, 'another cluster for an existing job: SQLSTATE 55000');
	like($err, qr/HINT:.*move_job/, 'with a hint to paidb.move_job');
	is(query($node, q{SELECT cluster || ' ' || placement || ' ' || request_generation || ' ' || xmin
	    FROM paidb.framework WHERE name = 'placea'}), $row_a, 'the job row is untouched');
	is(submit_to($pa, 'default')->{changed}, 'f', 'the same request with its own cluster is accepted (no change)');
	is(submit_to($pa, undef)->{changed}, 'f', 'and with a NULL cluster');

	# a job running in b while b gets cordoned
	submit_to(job_request('cordonlive', hold_state => 'AttemptRunning'), 'b');
	$placed{cordonlive} = 'b';
	ok(poll($node, q{SELECT state = 'RUNNING' FROM paidb.framework WHERE name = 'cordonlive'}), 'cordonlive runs in b');

	my $before = all_pids();
	$node->safe_psql('postgres', q{UPDATE paidb.cluster SET state = 'cordoned' WHERE name = 'b'});
	($ret, $err) = try_submit_to(job_request('cordonnew'), 'b');
	isnt($ret, 0, 'a new job for a cordoned cluster is refused');
	like($err, qr/ERROR:\s+55000/, 'cordoned cluster: SQLSTATE 55000');
	is(query($node, q{SELECT count(*) FROM paidb.framework WHERE name = 'cordonnew'}), '0', 'nothing is stored');

	# barrier: cluster d inserted after the cordon; once its workers run,
	# the launcher has seen both changes
	$node->safe_psql('postgres', sprintf(q{INSERT INTO paidb.cluster (name, api_server, token_file, namespace, retain_mode)
	    VALUES ('d', %s, %s, 'default', false)}, lit($fake{d}->url), lit($token_file{d})));
	ok(wait_cluster_workers('d', undef, 30), 'cluster d gets its three workers');
	delete $before->{d};
	pids_unchanged($before, 'cordoning b');
	is(query($node, q{SELECT state || ' ' || workers FROM paidb.cluster_status WHERE cluster = 'b'}), 'cordoned 3',
		'cluster_status: b is cordoned with its three workers');

	# its running job is still watched, completed and deleted
	is(release($fake{b}, 'cordonlive'), 200, 'cordonlive: hold lifted');
	ok(succeeded('cordonlive'), "a cordoned cluster's running job completes and is deleted from its API server");
	created_only_in('cordonlive', 'b');

	# uncordon; barrier: d's token file changes (d restarts, nobody else)
	$before = all_pids();
	$node->safe_psql('postgres', q{UPDATE paidb.cluster SET state = 'active' WHERE name = 'b'});
	my $d_token2 = copy_token($token_file{d});
	$node->safe_psql('postgres', 'UPDATE paidb.cluster SET token_file = ' . lit($d_token2) . q{ WHERE name = 'd'});
	ok(wait_cluster_workers('d', $before->{d}), "changing d's token_file restarts d's workers");
	pids_unchanged($before, 'uncordoning b, and changing d', 'd');
}

# ============================================================ 4. a new api_server for b
{
	# a job runs in b across the change
	submit_to(job_request('urlb', hold_state => 'AttemptRunning'), 'b');
	$placed{urlb} = 'b';
	ok(poll($node, q{SELECT state = 'RUNNING' FROM paidb.framework WHERE name = 'urlb'}), 'urlb runs in b');

	# the same server under another name
	my $before = all_pids();
	my $url2 = 'http://localhost:' . $fake{b}->port;
	$node->safe_psql('postgres', 'UPDATE paidb.cluster SET api_server = ' . lit($url2) . q{ WHERE name = 'b'});
	ok(wait_cluster_workers('b', $before->{b}), "changing b's api_server restarts b's three workers");
	pids_unchanged($before, "changing b's api_server", 'b');

	# and its token file
	$before = all_pids();
	my $b_token2 = copy_token($token_file{b});
	$node->safe_psql('postgres', 'UPDATE paidb.cluster SET token_file = ' . lit($b_token2) . q{ WHERE name = 'b'});
	ok(wait_cluster_workers('b', $before->{b}), "changing b's token_file restarts b's three workers");
	pids_unchanged($before, "changing b's token_file", 'b');

	# the running job was neither lost nor created again; a new one goes through
	is(query($node, q{SELECT state || ' ' || cluster || ' ' || placement FROM paidb.framework WHERE name = 'urlb'}),
		'RUNNING b 1', 'urlb is still running in b');
	is(release($fake{b}, 'urlb'), 200, 'urlb: hold lifted');
	ok(succeeded('urlb'), 'urlb completes after the restarts');
	created_only_in('urlb', 'b');
	submit_to(job_request('urlb2'), 'b');
	$placed{urlb2} = 'b';
	ok(succeeded('urlb2'), 'a job submitted to b after the change completes');
	created_only_in('urlb2', 'b');
}

# ============================================================ 5. remove_cluster
{
	submit_to(job_request('livec', hold_state => 'AttemptRunning'), 'c');
	$placed{livec} = 'c';
	ok(poll($node, q{SELECT state = 'RUNNING' FROM paidb.framework WHERE name = 'livec'}), 'livec runs in c');
	my $live = query($node, q{SELECT count(*) FROM paidb.framework WHERE cluster = 'c'
	    AND NOT (state IN ('SUCCEEDED', 'FAILED', 'STOPPED') AND api_server_deleted)});
	is($live, '1', 'c has one job that is not completed and deleted');

	my $before = all_pids();
	my ($ret, $err) = try_sql(q{SELECT paidb.remove_cluster('c')});
	isnt($ret, 0, 'remove_cluster is refused while c has a live job');
	like($err, qr/ERROR:\s+55000/, 'remove_cluster with a live job: SQLSTATE 55000');
	like($err, qr/ERROR:.*\b$live\b/, 'the message names the number of such jobs');
	is(query($node, q{SELECT state FROM paidb.cluster WHERE name = 'c'}), 'active', 'c is still active');

	$node->safe_psql('postgres', q{SELECT paidb.stop_framework('livec')});
	ok(poll($node, q{SELECT state = 'STOPPED' AND api_server_deleted FROM paidb.framework WHERE name = 'livec'}),
		'livec is stopped and deleted from its API server');
	is(fake_framework($fake{c}, 'livec'), undef, 'livec is gone from fake C');

	($ret, $err) = try_sql(q{SELECT paidb.remove_cluster('c')});
	is($ret, 0, 'remove_cluster(c) is allowed once its jobs are completed and deleted') or diag($err);
	is(query($node, q{SELECT state FROM paidb.cluster WHERE name = 'c'}), 'removed', 'c is removed');
	my @old_c = pid_list($before->{c});
	ok(poll($node, q{SELECT NOT EXISTS (SELECT 1 FROM paidb.status() s WHERE s.cluster = 'c' AND s.pid IS NOT NULL
	        AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = s.pid))
	    AND NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid IN (} . join(', ', @old_c, 'NULL') . '))'),
		"c's workers exit");
	ok(poll($node, q{SELECT workers = 0 FROM paidb.cluster_status WHERE cluster = 'c'}), 'cluster_status: c has no workers');
	delete $before->{c};
	my $now = all_pids();
	for my $c (sort keys %$before)
	{
		ok(pid_list($before->{$c}) == 3 && $now->{$c} eq $before->{$c},
			"removing c: the three workers of cluster $c kept their pids")
		  or diag("before: $before->{$c}, now: $now->{$c}");
	}

	($ret, $err) = try_submit_to(job_request('removedc'), 'c');
	like($err, qr/ERROR:\s+55000/, 'a removed cluster takes no new job: 55000');
	my $vcc = job_request('removedvcc');
	$vcc->{metadata}{labels}{virtualCluster} = 'vcc';
	($ret, $err) = try_submit_to($vcc, undef);
	like($err, qr/ERROR:\s+55000/, 'nor through its virtual cluster placement: 55000');
	is(query($node, q{SELECT count(*) FROM paidb.framework WHERE name IN ('removedc', 'removedvcc')}), '0',
		'nothing is stored');
}

# ============================================================ 5b. a cluster row deleted at run time
{
	# a row that no job refers to may be deleted outright: e, registered
	# and given its workers, then deleted
	my $before = all_pids();
	delete $before->{c};
	$node->safe_psql('postgres', sprintf(q{INSERT INTO paidb.cluster (name, api_server, token_file, namespace)
	    VALUES ('e', %s, %s, 'default')}, lit($fake{c}->url), lit($token_file{c})));
	ok(wait_cluster_workers('e', undef, 30), 'cluster e gets its three workers');
	my @old_e = pid_list(pids_of('e'));
	is(scalar(@old_e), 3, 'e has three worker pids');
	pids_unchanged($before, 'adding e');

	$node->safe_psql('postgres', q{DELETE FROM paidb.cluster WHERE name = 'e'});
	ok(poll($node, q{SELECT NOT EXISTS (SELECT 1 FROM paidb.status() s WHERE s.cluster = 'e')
	    AND NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid IN (} . join(', ', @old_e, 'NULL') . '))', 't', 30),
		"deleting e's row: its workers exit and status() no longer lists it");
	is(query($node, q{SELECT count(*) FROM paidb.cluster_status WHERE cluster = 'e'}), '0',
		'cluster_status no longer lists e');
	pids_unchanged($before, "deleting e's row");

	# a row that jobs refer to cannot be deleted: nothing changes
	my ($ret, $err) = try_sql(q{DELETE FROM paidb.cluster WHERE name = 'b'});
	like($err, qr/ERROR:\s+23503/, "deleting the row of b, which has jobs, is refused (23503)");
	is(query($node, q{SELECT state FROM paidb.cluster WHERE name = 'b'}), 'active', 'b is still there and active');
	pids_unchanged($before, "the refused delete of b's row");
}

# ============================================================ 6. retain mode per cluster
{
	my ($code, $kept) = $fake{b}->api(POST => fw_path(), paidb_like('orphanb', hold_state => 'AttemptRunning'));
	is($code, 201, 'an unknown framework is created directly in fake B (retain_mode true)');
	($code) = $fake{d}->api(POST => fw_path(), paidb_like('orphand', hold_state => 'AttemptRunning'));
	is($code, 201, 'and one in fake D (retain_mode false)');

	ok(wait_until(sub { !fake_framework($fake{d}, 'orphand') }), "d's orphan is deleted from fake D");
	ok(watcher_passed('b', $fake{b}), "b's framework watcher has passed b's orphan");
	# a job through b's sync worker after that: the orphan had its chance
	submit_to(job_request('retainb'), 'b');
	$placed{retainb} = 'b';
	ok(succeeded('retainb'), 'a job in b completes meanwhile');
	ok(fake_framework($fake{b}, 'orphanb'), "b's orphan is kept (retain_mode true)");
	is(scalar(fake_requests($fake{b}, 'DELETE', qr{/frameworks/orphanb(?:[/?]|$)})), 0,
		'no DELETE of it was ever sent to fake B');
	is(query($node, q{SELECT count(*) FROM paidb.framework WHERE name IN ('orphanb', 'orphand')}), '0',
		'neither orphan became a job');
	$fake{b}->api(DELETE => fw_path('orphanb'));
}

# ============================================================ 7. clusters do not mix
{
	# every job so far: no request about it reached another cluster's API server
	cmp_ok(touched($fake{b}, 'placeb'), '>', 0, "the request logs show paidb's requests about a job (this check can see them)");
	for my $name (sort keys %placed)
	{
		my @where = grep { $_ ne $placed{$name} && touched($fake{$_}, $name) } sort keys %fake;
		is("@where", '', "$name (cluster $cluster_of{$placed{$name}}): no request about it in another fake");
	}
	for my $name (qw(unknown3 cordonnew removedc removedvcc))
	{
		my @where = grep { touched($fake{$_}, $name) } sort keys %fake;
		is("@where", '', "$name (refused): no request about it in any fake");
	}

	# a job held running in b; a framework of the same name appears in fake A
	submit_to(job_request('crossb', hold_state => 'AttemptRunning'), 'b');
	$placed{crossb} = 'b';
	ok(poll($node, q{SELECT state = 'RUNNING' FROM paidb.framework WHERE name = 'crossb'}), 'crossb runs in b');
	ok(watcher_passed('b', $fake{b}), "b's watcher has passed crossb's events");
	my $row_sql = q{SELECT state || ' ' || sub_state || ' ' || cluster || ' ' || placement || ' ' || request_synced
	    || ' ' || api_server_deleted || ' ' || coalesce(app_exit_code::text, '-') || ' ' || resource_version
	    || ' ' || md5(paidb.snapshot(f)::text) FROM paidb.framework f WHERE name = 'crossb'};
	my $row = query($node, $row_sql);
	like($row, qr/^RUNNING AttemptRunning b 1 true false /, 'crossb: running, synced, in b');
	is(touched($fake{a}, 'crossb') + touched($fake{c}, 'crossb') + touched($fake{d}, 'crossb'), 0,
		'crossb: nothing about it in fakes A, C, D');

	# the stray copy fails with exit code 7 unless it is deleted first
	my ($code) = $fake{a}->api(POST => fw_path(), paidb_like('crossb', exit_codes => '7'));
	is($code, 201, 'a framework named crossb is created directly in fake A');
	ok(wait_until(sub {
		my $f = fake_framework($fake{a}, 'crossb');
		return !$f || ($f->{status}{state} // '') eq 'Completed';
	}), "fake A's crossb completed or was deleted");
	ok(watcher_passed('default', $fake{a}), "the default cluster's watcher has passed all of it");
	is(query($node, $row_sql), $row, "the job row is unchanged by another cluster's framework");
	ok(wait_until(sub { !fake_framework($fake{a}, 'crossb') }),
		"the default cluster's sync worker deletes the stray copy, retain mode on or not (SPEC §11)");
	is(fake_creates($fake{b}, 'crossb'), 1, 'crossb was created once in fake B');

	is(release($fake{b}, 'crossb'), 200, 'crossb: hold lifted');
	ok(succeeded('crossb'), 'crossb runs to SUCCEEDED in b');
	is(query($node, q{SELECT coalesce(app_exit_code::text, '-') FROM paidb.framework WHERE name = 'crossb'}), '0',
		"its exit code is b's (0), not the stray copy's (7)");
}

# ============================================================ the end
# cluster_status against the jobs table (states with no job may be left out or 0)
ok(poll($node, q{SELECT bool_and(
        (SELECT coalesce(jsonb_object_agg(k, v), '{}'::jsonb) FROM jsonb_each(s.jobs) AS j(k, v) WHERE v <> '0'::jsonb)
        = coalesce((SELECT jsonb_object_agg(state, n) FROM
            (SELECT state, count(*) AS n FROM paidb.framework f WHERE f.cluster = s.cluster GROUP BY state) x), '{}'::jsonb)
        AND s.unsynced::text = '0' AND coalesce(s.moving_out::text, '0') IN ('0', 'false'))
    FROM paidb.cluster_status s}),
	'cluster_status: per-state job counts match paidb.framework, nothing unsynced or moving out');
is(query($node, q{SELECT string_agg(cluster || ':' || state || ':' || workers
        || CASE WHEN state = 'removed' THEN '' ELSE ':' || (last_contact IS NOT NULL) END, ',' ORDER BY cluster)
    FROM paidb.cluster_status}),
	'b:active:3:true,c:removed:0,d:active:3:true,default:active:3:true',
	'cluster_status: states, running workers, last contact');
is(join("\n", crash_lines($node)), '', 'no paidb process crashed');

done_testing();
