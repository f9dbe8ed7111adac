# The sync worker at the trust boundary (SPEC §8), against kube-fake:
#  1. orphans whose names no framework can have (".", "..", 10,000 and 64
#     characters) are never claimed: no DELETE of a collection or of the
#     namespace, no crash, and a real orphan behind them is still deleted;
#  2. add-on identity: an existing Secret or PriorityClass without paidb's
#     label fails the job for good (the API server's words in its event) and
#     is left untouched; one with the label for that job is adopted;
#  3. a framework create answered 409: adopted when the framework carries
#     paidb's label for that name, a permanent failure (and never deleted)
#     when it does not;
#  4. a non-JSON 2xx answer (a proxy's HTML page) to a create, or to a
#     create that was done, is an error for that job alone: logged, counted
#     in status() without the token, retried; the worker never exits;
#  5. 400 on create is permanent; a failed owner-reference patch is retried;
#  6. the bearer token over plain http:// is warned about once per server
#     and process;
#  7. a token file that cannot be read (a directory): a WARNING with the
#     reason, 401s in status(), no crash, and the job goes through once the
#     file is back.
use strict;
use warnings;
use Cwd qw(abs_path);
use JSON::PP;
use MIME::Base64 qw(encode_base64);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use KubeFake;
use PaidbTest;

$PaidbTest::STEP = 0.05;

my ($token, $token_file) = PaidbTest::new_token('paidb-042-token-');
my $fake = PaidbTest::start_fake(token_file => $token_file);
my $node = PaidbTest::start_node('sync_hardening', $fake, token_file => $token_file,
	retain_mode => 'off', restart_after_crash => 'off',
	conf => "paidb.k8s_timeout = '5s'\n");

my $NS = '/api/v1/namespaces/default';
my $FW = '/apis/frameworkcontroller.microsoft.com/v1/namespaces/default/frameworks';
my $PC = '/apis/scheduling.k8s.io/v1/priorityclasses';

# The sync worker's row of status().
sub sync_status
{
	my ($pid, $errors, $err) = split /\|/, $node->safe_psql('postgres',
		q{SELECT pid, errors, replace(coalesce(last_error, ''), E'\n', ' ')
		    FROM paidb.status() WHERE worker = 'sync'}), 3;
	return { pid => $pid, errors => $errors, last_error => $err // '' };
}

# Requests the fake received, by "verb resource".
sub requests { return $fake->counters->{requests}; }

# A job's final state (state and exit code), waiting for it to end.
sub job_final
{
	my ($name) = @_;
	ok(poll($node, "SELECT state IN ('SUCCEEDED', 'FAILED', 'STOPPED') FROM paidb.framework WHERE name = '$name'"),
		"$name reaches a final state");
	return $node->safe_psql('postgres',
		"SELECT state || ' ' || coalesce(app_exit_code::text, 'null') FROM paidb.framework WHERE name = '$name'");
}

# The permanent-failure event of a job: its message.
sub permanent_event
{
	my ($name) = @_;
	return $node->safe_psql('postgres', qq{SELECT message FROM paidb.framework_event
		WHERE framework_name = '$name' AND reason = 'CreateFrameworkPermanentFailed'});
}

# A secret definition.
sub secret
{
	my ($name, %o) = @_;
	return { apiVersion => 'v1', kind => 'Secret', type => 'Opaque',
		metadata => { name => $name, %{ $o{metadata} // {} } },
		data => { 'x' => encode_base64($o{value} // 'v', '') } };
}

my $sync0 = sync_status();
ok($sync0->{pid}, 'the sync worker runs');

# ============================================================ 1. hostile orphans
{
	# a job that must survive: a deletecollection would take it
	submit($node, job_request('bystander1', hold_state => 'AttemptRunning'));
	ok(poll($node, "SELECT state = 'RUNNING' FROM paidb.framework WHERE name = 'bystander1'"),
		'bystander1 runs');
	my $c0 = requests();

	# paidb 0.2 refuses them twice: the watched event (sql/addons.sql) and
	# the table's CHECK; lift the CHECK, as if they had been stored before
	my ($rc, $out, $err) = $node->psql('postgres', q{BEGIN; INSERT INTO paidb.orphan (name) VALUES ('.'); ROLLBACK});
	like($err, qr/orphan_name_valid/, 'paidb.orphan refuses a name no framework can have');
	$node->safe_psql('postgres', q{ALTER TABLE paidb.orphan DROP CONSTRAINT IF EXISTS orphan_name_valid});
	$node->safe_psql('postgres', q{
		INSERT INTO paidb.orphan (name, uid, queued_at) VALUES
		  ('.', 'u-dot', now() - interval '1 hour'), ('..', 'u-dotdot', now() - interval '1 hour'),
		  (repeat('a', 10000), 'u-long', now() - interval '1 hour'),
		  (repeat('a', 64), 'u-64', now() - interval '1 hour'),  -- the same first 63 bytes
		  ('realorphan1', 'u-real', now());
		SELECT paidb.wakeup();});
	# the real orphan is deleted (404: not in the fake) and forgotten ...
	ok(poll($node, q{SELECT NOT EXISTS (SELECT 1 FROM paidb.orphan WHERE name = 'realorphan1')}),
		'the real orphan behind them is handled');
	# ... and one more resync passes
	$node->safe_psql('postgres', 'SELECT paidb.wakeup()');
	ok(poll($node, q{SELECT requests_sent > 0 FROM paidb.status() WHERE worker = 'sync'}), 'sync is alive');
	my $c1 = requests();
	my @bad = grep { /^(deletecollection|delete namespaces)/ && ($c1->{$_} // 0) != ($c0->{$_} // 0) } keys %$c1;
	is("@bad", '', 'no deletecollection and no namespace delete was sent');
	my ($code) = $fake->api(GET => "$FW/bystander1");
	is($code, 200, 'the bystander framework is still there');
	($code) = $fake->api(GET => '/api/v1/namespaces/default');
	is($code, 200, 'the namespace is still there');
	is(sync_status()->{pid}, $sync0->{pid}, 'the sync worker did not restart');
	is(join("\n", crash_lines($node)), '', 'no process crashed');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.orphan WHERE length(name) > 63 OR name LIKE '.%'}),
		'4', 'the hostile orphans were never claimed (still queued, never sent)');
	$node->safe_psql('postgres', q{DELETE FROM paidb.orphan});

	# the name size these checks and the workers' hash keys use is defined
	# once (src/k8s_objects.h), not again per file or as NAMEDATALEN
	my @src = (glob('src/*.c'), glob('src/*.h'));
	my (@defs, @keys);
	for my $f (@src)
	{
		my $text = slurp_file($f);
		push @defs, $f while $text =~ /^#define\s+\w*FRAMEWORK_NAME_SIZE\b/mg;
		push @keys, $f if $f =~ m{/worker_(sync|watch)\.c$} && $text =~ /keysize\s*=\s*NAMEDATALEN\b/;
	}
	ok((grep { m{/worker_sync\.c$} } @src) && (grep { m{/worker_watch\.c$} } @src),
		'the sources are there to check');
	is("@defs", 'src/k8s_objects.h', 'the framework-name size is defined once, in src/k8s_objects.h');
	is("@keys", '', "the workers' hashes of framework names are not keyed by NAMEDATALEN");
}

# ============================================================ 2. add-on identity
{
	# a Secret and a PriorityClass that are somebody else's
	my ($code) = $fake->api(POST => "$NS/secrets", secret('foreign-cfg', value => 'theirs'));
	is($code, 201, 'a foreign secret exists');
	($code) = $fake->api(POST => $PC, { apiVersion => 'scheduling.k8s.io/v1', kind => 'PriorityClass',
		metadata => { name => 'foreign-prio' }, value => 7 });
	is($code, 201, 'a foreign priority class exists');
	# and one made for job "addonmine" (a create whose answer was lost)
	($code) = $fake->api(POST => "$NS/secrets",
		secret('mine-cfg', metadata => { labels => { 'paidb.io/framework' => 'addonmine' } }));
	is($code, 201, 'a secret labelled for addonmine exists');

	submit($node, job_request('addonforeign'), add_ons => { configSecretDef => secret('foreign-cfg', value => 'ours') });
	submit($node, job_request('prioforeign'), add_ons => { priorityClassDef => {
		apiVersion => 'scheduling.k8s.io/v1', kind => 'PriorityClass', metadata => { name => 'foreign-prio' }, value => 9 } });
	submit($node, job_request('addonmine'), add_ons => { configSecretDef => secret('mine-cfg') });

	is(job_final('addonforeign'), 'FAILED -1100', 'a foreign secret fails the job for good');
	like(permanent_event('addonforeign'), qr/already exists.*not created by paidb/,
		"the event carries the API server's words and why");
	is(job_final('prioforeign'), 'FAILED -1100', 'a foreign priority class fails the job for good');
	my ($c, $s) = $fake->api(GET => "$NS/secrets/foreign-cfg");
	is($c, 200, 'the foreign secret is still there');
	is($s->{data}{x}, encode_base64('theirs', ''), 'its content is theirs');
	ok(!$s->{metadata}{ownerReferences} && !($s->{metadata}{labels} // {})->{'paidb.io/framework'},
		'it got no owner reference and no label');
	($c, $s) = $fake->api(GET => "$PC/foreign-prio");
	is("$c $s->{value}", '200 7', 'the foreign priority class is still there, unchanged');
	my $counters = $fake->counters;
	ok(!$counters->{creates}{frameworks}{addonforeign} && !$counters->{creates}{frameworks}{prioforeign},
		'their frameworks were never created');

	is(job_final('addonmine'), 'SUCCEEDED 0', 'a secret labelled for the job is adopted');
	# its framework went; the secret with it (owner reference) or by paidb's delete
	ok(wait_until(sub { ($fake->api(GET => "$NS/secrets/mine-cfg"))[0] == 404 }),
		'the adopted secret went with its job');
	# the foreign ones stay after their jobs ended and were cleaned up
	ok(poll($node, q{SELECT bool_and(api_server_deleted) FROM paidb.framework WHERE name IN ('addonforeign', 'prioforeign')}),
		'the failed jobs are done with');
	is(($fake->api(GET => "$NS/secrets/foreign-cfg"))[0], 200, 'the foreign secret is never deleted');
	is(($fake->api(GET => "$PC/foreign-prio"))[0], 200, 'the foreign priority class is never deleted');

	# a job with its own add-ons: created with the label
	submit($node, job_request('addonlabel', hold_state => 'AttemptRunning'),
		add_ons => { configSecretDef => secret('addonlabel-cfg') });
	ok(poll($node, "SELECT state = 'RUNNING' FROM paidb.framework WHERE name = 'addonlabel'"), 'addonlabel runs');
	($c, $s) = $fake->api(GET => "$NS/secrets/addonlabel-cfg");
	is(($s->{metadata}{labels} // {})->{'paidb.io/framework'}, 'addonlabel', 'a created add-on carries the label');
	($c, $s) = $fake->api(GET => "$FW/addonlabel");
	is(($s->{metadata}{labels} // {})->{'paidb.io/framework'}, 'addonlabel', 'a created framework carries the label');
	is(($s->{metadata}{labels} // {})->{userName}, 'alice', "the request's own labels are kept");
	$node->safe_psql('postgres', "SELECT paidb.stop_framework('addonlabel')");
	job_final('addonlabel');
}

# ============================================================ 3. framework create 409
{
	# frameworks of those names exist before their jobs: keep them from
	# being deleted as orphans meanwhile
	$node->append_conf('postgresql.conf', "paidb.retain_mode = on\n");
	$node->reload;
	ok(poll($node, q{SELECT current_setting('paidb.retain_mode') = 'on'}), 'retain mode on');
	my $mine = job_request('adoptme', hold_state => 'AttemptCreationPending');
	$mine->{metadata}{labels}{'paidb.io/framework'} = 'adoptme';
	my ($code) = $fake->api(POST => $FW, $mine);
	is($code, 201, 'a framework labelled for adoptme exists');
	my $theirs = job_request('foreignfw', hold_state => 'AttemptCreationPending');
	($code) = $fake->api(POST => $FW, $theirs);
	is($code, 201, 'a foreign framework foreignfw exists');
	# The watcher passes both before the jobs exist (with retain mode on it
	# ignores them): this case is the create's 409.  A watch event of the
	# foreign framework merged after the submission is another case (the
	# job would take its status), which a loaded machine produced here:
	# kube-fake's controller gives each a status (AttemptCreationPending,
	# where they are held) one step after the create, so the watcher must
	# pass that update too, not only the create.
	my $settled_rv = 0;
	ok(wait_until(sub {
		$settled_rv = 0;
		for my $n ('adoptme', 'foreignfw')
		{
			my ($c, $f) = $fake->api(GET => "$FW/$n");
			return 0 unless $c == 200 && ($f->{status}{state} // '') eq 'AttemptCreationPending';
			$settled_rv = $f->{metadata}{resourceVersion} if $f->{metadata}{resourceVersion} > $settled_rv;
		}
		return 1;
	}), 'kube-fake holds both frameworks in AttemptCreationPending');
	ok(poll($node, qq{SELECT resource_version::bigint >= $settled_rv
	        FROM paidb.watch_state WHERE watcher = 'frameworks'}),
		'the framework watcher has passed both frameworks and their statuses');

	submit($node, job_request('adoptme'));
	submit($node, job_request('foreignfw'));
	ok(poll($node, q{SELECT request_synced FROM paidb.framework WHERE name = 'adoptme'}),
		'a framework with our label is adopted: our request is patched onto it and confirmed');
	my $cnt = $fake->counters;
	is(($cnt->{createAttempts}{frameworks}{adoptme} // 0) . ' ' . ($cnt->{creates}{frameworks}{adoptme} // 0),
		'2 1', 'adoptme: our create met the existing one (409), nothing was created twice');
	# its hold (an annotation our merge patch does not remove) lifted: it runs to its end
	PaidbTest::fake_release_hold($fake, 'adoptme');
	is(job_final('adoptme'), 'SUCCEEDED 0', 'the adopted framework runs to its end');
	is(job_final('foreignfw'), 'FAILED -1100', 'a foreign framework of the same name fails the job for good');
	like(permanent_event('foreignfw'), qr/already exists.*not created by paidb/, 'with the reason in its event');
	ok(poll($node, q{SELECT api_server_deleted FROM paidb.framework WHERE name = 'foreignfw'}),
		'the failed job is done with');
	my ($c, $f) = $fake->api(GET => "$FW/foreignfw");
	is($c, 200, 'the foreign framework is never deleted');
	is($f->{metadata}{annotations}{'kube-fake/hold-state'}, 'AttemptCreationPending', 'nor patched');
	# clean up, then back to deleting orphans
	$fake->api(DELETE => "$FW/foreignfw");
	$node->append_conf('postgresql.conf', "paidb.retain_mode = off\n");
	$node->reload;
}

# ============================================================ 4. non-JSON 2xx
{
	my $e0 = sync_status()->{errors};
	# a proxy page instead of the created object, twice; the second time the
	# create was done first (the retry then meets a 409 and adopts it)
	$fake->fault(action => 'body', status => 201, verb => 'create', resource => 'frameworks', name => 'html1', count => 1);
	$fake->fault(action => 'body', status => 200, verb => 'create', resource => 'frameworks', name => 'html2',
		count => 1, phase => 'after');
	$fake->fault(action => 'body', status => 200, verb => 'patch', resource => 'frameworks', name => 'html3',
		count => 1, body => 'not json at all');
	submit($node, job_request($_)) for qw(html1 html2 plain1 plain2);
	submit($node, job_request('html3', hold_state => 'AttemptRunning'));
	ok(poll($node, q{SELECT request_synced AND state = 'RUNNING' FROM paidb.framework WHERE name = 'html3'}),
		'html3 is created and runs');
	$node->safe_psql('postgres', q{SELECT * FROM paidb.patch_framework_request('html3', '{"metadata": {"annotations": {"note": "patched"}}}')});
	ok(poll($node, q{SELECT request_synced FROM paidb.framework WHERE name = 'html3'}),
		'html3: the patch answered with a non-JSON body is sent again and confirmed');
	$node->safe_psql('postgres', q{SELECT paidb.stop_framework('html3')});
	is(job_final($_), 'SUCCEEDED 0', "$_ succeeds") for qw(html1 html2 plain1 plain2);
	like(job_final('html3'), qr/^STOPPED/, 'html3 stops');
	my $st = sync_status();
	is($st->{pid}, $sync0->{pid}, 'the sync worker never exited');
	is(PaidbTest::worker_exits($node, 'sync'), 0, 'no "paidb sync exited" line in the log');
	cmp_ok($st->{errors} - $e0, '>=', 2, 'status() counted the bad answers');
	my $log = log_since($node);
	like($log, qr/paidb sync failed on framework "html1": invalid input syntax for type json/,
		'the bad answer is logged with its framework');
	unlike($log, qr/\Q$token\E/, 'the token is in no log line');
	unlike($st->{last_error}, qr/\Q$token\E/, 'nor in status()');
	my $counters = $fake->counters;
	is($counters->{creates}{frameworks}{html2}, 1, 'html2 (done, answered with HTML) was created once');
	is_deeply($fake->admin(GET => '/_fake/faults')->{faults}, [], 'every bad answer was sent');
}

# ============================================================ 5. 400 permanent, owner reference retried
{
	$fake->fault(status => 400, reason => 'BadRequest', message => 'the body cannot be decoded',
		verb => 'create', resource => 'frameworks', name => 'bad400', count => -1);
	submit($node, job_request('bad400'));
	is(job_final('bad400'), 'FAILED -1100', '400 BadRequest on create is permanent');
	like(permanent_event('bad400'), qr/cannot be decoded/, "with the API server's words");
	is($fake->counters->{createAttempts}{frameworks}{bad400}, 1, 'and is never retried');
	$fake->clear_faults;

	$fake->fault(status => 503, verb => 'patch', resource => 'secrets', count => 2);
	submit($node, job_request('ownerref1', hold_state => 'AttemptRunning'),
		add_ons => { configSecretDef => secret('ownerref1-cfg') });
	ok(wait_until(sub {
		my ($c, $s) = $fake->api(GET => "$NS/secrets/ownerref1-cfg");
		return $c == 200 && grep { $_->{kind} eq 'Framework' && $_->{name} eq 'ownerref1' }
		  @{ $s->{metadata}{ownerReferences} // [] };
	}), 'a failed owner-reference patch is retried until the secret is owned');
	is_deeply($fake->admin(GET => '/_fake/faults')->{faults}, [], 'both failures were hit');
	$node->safe_psql('postgres', "SELECT paidb.stop_framework('ownerref1')");
	job_final('ownerref1');
}

# ============================================================ 6. token over http
{
	my $url = $fake->url;
	my @w = (log_since($node) =~ /WARNING:  paidb sends its bearer token to \Q$url\E over plain http/g);
	cmp_ok(scalar(@w), '>=', 1, 'the token over plain http is warned about');
	cmp_ok(scalar(@w), '<=', 3, 'once per process (three workers), not per request (' . scalar(@w) . ')');
}

# ============================================================ 7. a token file that cannot be read
# paidb.k8s_token_file names a directory: open() works, read() fails with
# EISDIR (k8s_read_small_file's read-error path).  A WARNING names the file
# and the reason, the requests go without a token (the old one belonged to
# the other file) and are refused with 401, which status() shows; nothing
# crashes, no worker exits, and with the file back the job goes through.
{
	my $dir = abs_path(PostgreSQL::Test::Utils::tempdir);
	my $st0 = sync_status();
	my $off = -s $node->logfile;
	$node->safe_psql('postgres', "ALTER SYSTEM SET paidb.k8s_token_file = '$dir'");
	$node->reload;
	ok(poll($node, "SELECT current_setting('paidb.k8s_token_file') = '$dir'"),
		'paidb.k8s_token_file names a directory');
	submit($node, job_request('notoken1'));
	ok(wait_log($node, qr/WARNING:  could not read token file "\Q$dir\E": Is a directory/, $off),
		'a WARNING names the token file and says why it cannot be read');
	ok(wait_until(sub { sync_status()->{last_error} =~ /notoken1: HTTP 401 Unauthorized/ }),
		'status() shows the request refused without a token (401)')
	  or diag(sync_status()->{last_error});
	my $st = sync_status();
	cmp_ok($st->{errors}, '>', $st0->{errors}, 'and counts it');
	is($node->safe_psql('postgres', "SELECT state FROM paidb.framework WHERE name = 'notoken1'"), 'WAITING',
		'the job waits (401 is retried, not a permanent failure)');
	is($st->{pid}, $st0->{pid}, 'the sync worker did not exit');

	$node->safe_psql('postgres', 'ALTER SYSTEM RESET paidb.k8s_token_file');
	$node->reload;
	is(job_final('notoken1'), 'SUCCEEDED 0', 'with the token file back the job goes through');
	my $log = log_since($node, $off);
	is(PaidbTest::worker_exits($node, $_, $off), 0, "no \"paidb $_ exited\" line in the log")
	  for ('sync', 'framework watcher', 'event watcher');
	unlike($log, qr/\Q$token\E/, 'the token is in no log line');
	unlike(query($node, q{SELECT string_agg(coalesce(last_error, ''), ' ') FROM paidb.status()}),
		qr/\Q$token\E/, 'nor in status()');
}

is(join("\n", crash_lines($node)), '', 'no process crashed');
$node->stop;
done_testing();
