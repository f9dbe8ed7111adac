# paidb under API server faults (SPEC §6) against kube-fake with its
# simulated frameworkcontroller: bursts of 500 and 503 (also a lost response
# and a dropped connection) on creates and patches, 429 with Retry-After
# (and one asking for a day, honoured only up to paidb.max_retry_after), a
# 410 ERROR event in the watch stream, a watcher that falls behind a
# compaction while a framework vanishes, watches cut in the middle of an
# event, and an API server that refuses connections for 5 s.  Through all of
# it every job reaches its right final state, no framework is created twice,
# no status event is lost, and status() counts the errors without ever
# showing the token.  Permanent refusals (422, 500 ResourceExhausted, 413) of
# a job's framework fail the job with -1100 and are never retried.
use strict;
use warnings;
use JSON::PP;
use MIME::Base64 qw(encode_base64);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use KubeFake;
use PaidbTest;

# (any single condition may take $PaidbTest::WAIT = 60 s to become true)
$PaidbTest::STEP = 0.02;

# ---------------------------------------------------------------- kube-fake
my ($token, $token_file) = PaidbTest::new_token('paidb-040-token-');
my $fake = PaidbTest::start_fake(token_file => $token_file);

# ---------------------------------------------------------------- PostgreSQL
my $node = PaidbTest::new_node('api_faults', $fake, token_file => $token_file,
	resync_interval => '20s', retain_mode => 'off', restart_after_crash => 'off',
	conf => "paidb.k8s_timeout = '5s'\npaidb.max_rpc_concurrency = 8\npaidb.max_retry_after = '4s'\n");
ok($node->poll_query_until('postgres',
	q{SELECT count(*) = 5 FROM paidb.status() WHERE pid IS NOT NULL AND state NOT LIKE 'waiting%'}),
	'the five workers run (launcher, retention, and the default cluster\'s three)');
ok($fake->wait_for_watches(2, $PaidbTest::WAIT), 'both watchers watch');

# The sync worker's row of status(): {errors, requests_sent, last_error}.
sub sync_status
{
	my ($errors, $sent, $err) = split /\|/, $node->safe_psql('postgres',
		q{SELECT errors, requests_sent, replace(coalesce(last_error, ''), E'\n', ' ')
		    FROM paidb.status() WHERE worker = 'sync'}), 3;
	return { errors => $errors, sent => $sent, last_error => $err // '' };
}

# ---------------------------------------------------------------- jobs
# What each job must end as: name => [state, retries, app_exit_code, history rows].
my %expect;
my %kinds = (
	ok => { codes => '0', max => 0, end => [ 'SUCCEEDED', 0, 0, 0 ] },
	retry => { codes => '1,0', max => 1, end => [ 'SUCCEEDED', 1, 0, 1 ] },
	fail => { codes => '3', max => 0, end => [ 'FAILED', 0, 3, 0 ] },
);

# The SQL submitting a job of a kind (ok, retry, fail), with add-ons if given.
sub submit_sql
{
	my ($name, $kind, %o) = @_;
	my $k = $kinds{$kind};
	$expect{$name} = $o{expect} // $k->{end};
	my $req = encode_json(bare_framework($name,
		annotations => { jobName => $name, userName => 'alice',
			'kube-fake/exit-codes' => $k->{codes}, %{ $o{ann} // {} } },
		max_retry => $k->{max}, task_number => 2));
	my $addons = encode_json($o{add_ons} // {});
	return "SELECT name FROM paidb.put_framework_request(\$j\$$req\$j\$::jsonb, now(), \$a\$$addons\$a\$::jsonb);\n";
}

# Submit jobs in one transaction: submit_jobs([name, kind, %o], ...).
sub submit_jobs
{
	my $sql = "BEGIN;\n" . join('', map { submit_sql(@$_) } @_) . "COMMIT;\n";
	$node->safe_psql('postgres', $sql);
}

# The jobs (of the given names) that are not yet as expected, with what they are.
sub not_final
{
	my @names = @_;
	my %row;
	my $list = join(',', map { "'$_'" } @names);
	for my $line (split /\n/, $node->safe_psql('postgres', qq{
		SELECT name, state, retries, coalesce(app_exit_code::text, 'null'),
		       (SELECT count(*) FROM paidb.framework_history h WHERE h.framework_name = f.name),
		       api_server_deleted
		  FROM paidb.framework f WHERE name IN ($list)}))
	{
		my ($n, @v) = split /\|/, $line;
		$row{$n} = \@v;
	}
	my %bad;
	for my $n (@names)
	{
		# undef in an expectation: any value
		my @want = (@{ $expect{$n} }, 't');
		my @got = $row{$n} ? @{ $row{$n} } : ();
		my $same = @got == @want;
		for my $i (0 .. $#want)
		{
			$same = 0 if defined $want[$i] && ($got[$i] // '') ne $want[$i];
		}
		$bad{$n} = 'want ' . join(' ', map { $_ // '*' } @want) . ', got '
		  . (@got ? join(' ', @got) : 'missing')
		  unless $same;
	}
	return \%bad;
}

# Wait until the jobs reach their final state (frameworks deleted); test it.
sub jobs_final
{
	my ($what, @names) = @_;
	my $bad;
	wait_until(sub { $bad = not_final(@names); !%$bad });
	is_deeply($bad, {}, "$what: every job reached its final state (" . scalar(@names) . ' jobs)')
	  or diag explain $bad;
}

# ---------------------------------------------------------------- 1. 500/503 bursts
{
	my $err0 = sync_status()->{errors};
	$fake->fault(status => 500, verb => 'create', resource => 'frameworks', count => 3);
	$fake->fault(status => 503, verb => 'create', resource => 'frameworks', count => 3);
	$fake->fault(status => 503, verb => 'patch', resource => 'frameworks', count => 3);
	$fake->fault(status => 503, verb => 'create', resource => 'secrets', count => 1);
	# a lost response: the create is done, the answer is a 500 (for a job
	# with an add-on, which must still end up owned by its framework)
	$fake->fault(status => 500, verb => 'create', resource => 'frameworks', name => 'addon2',
		count => 1, phase => 'after');
	# a dropped connection
	$fake->fault(action => 'drop', verb => 'create', resource => 'frameworks', count => 1);
	my @jobs = map { [ "burst$_", (qw(ok retry fail))[ $_ % 3 ] ] } 1 .. 10;
	for my $i (1 .. 2)
	{
		push @jobs, [ "addon$i", 'ok', add_ons => { configSecretDef => {
			apiVersion => 'v1', kind => 'Secret',
			metadata => { name => "addon$i-configcred", namespace => 'default' },
			type => 'Opaque', data => { 'config.yaml' => encode_base64("name: addon$i\n", '') } } } ];
	}
	submit_jobs(@jobs);
	jobs_final('500/503 bursts', map { $_->[0] } @jobs);
	is_deeply($fake->admin(GET => '/_fake/faults')->{faults}, [], 'every injected fault was hit');
	my $st = sync_status();
	cmp_ok($st->{errors} - $err0, '>=', 9, "status() counted the failed requests ($st->{errors})");
	my $c = $fake->counters;
	is($c->{creates}{secrets}{"addon$_-configcred"}, 1, "the add-on of addon$_ was created once")
	  for 1 .. 2;
	my ($code, $list) = $fake->api(GET => '/api/v1/namespaces/default/secrets');
	my @left = map { $_->{metadata}{name} } grep { $_->{metadata}{name} =~ /^addon\d-configcred$/ } @{ $list->{items} };
	is("@left", '', 'the add-ons went with their frameworks (owner references), a lost create response too');
}

# ---------------------------------------------------------------- 1b. a lone retry
# One job, one 503, nothing else happening: the retry must come after the
# backoff (0.8 s +-20%), not at the next resync.
{
	$fake->fault(status => 503, verb => 'create', resource => 'frameworks', name => 'lone1', count => 1);
	submit_jobs([ 'lone1', 'ok' ]);
	jobs_final('a lone retry', 'lone1');
	my @log = @{ fake_request_times($fake) };
	my ($t503) = map { $_->{end} } grep { $_->{code} eq '503' && $_->{method} eq 'POST' } reverse @log;
	my ($next) = grep { $_->{start} > $t503 && $_->{method} ne 'GET' } @log;
	my $gap = defined $next ? $next->{start} - $t503 : 99;
	ok($gap >= 0.5 && $gap < 3,
		sprintf('a lone failed job is retried after its backoff: %.2f s after the 503 (want 0.5-3 s)', $gap));
}

# ---------------------------------------------------------------- 2. 429 with Retry-After
{
	$fake->fault(status => 429, retryAfter => 2, verb => 'create', resource => 'frameworks',
		name => 'tmr1', count => 1);
	submit_jobs([ 'tmr1', 'ok' ]);
	ok(wait_until(sub { ($fake->counters->{responses}{429} // 0) >= 1 }), 'the create got 429');
	submit_jobs([ 'tmr2', 'ok' ]);	# a new job while the API server asks to wait
	ok(wait_until(sub { sync_status()->{last_error} =~ /\b429\b/ }, 10),
		'status() shows the 429 as last_error');
	like(sync_status()->{last_error}, qr/tmr1/, 'last_error names the framework');
	jobs_final('429', 'tmr1', 'tmr2');
	my @log = @{ fake_request_times($fake) };
	my ($t429) = map { $_->{end} } grep { $_->{code} eq '429' } @log;
	my ($next) = grep { $_->{start} > $t429 && $_->{target} =~ m{/frameworks/tmr1(\?|$)} } @log;
	ok(defined $next, 'the job was sent again after the 429');
	my $gap = defined $next ? $next->{start} - $t429 : 0;
	cmp_ok($gap, '>=', 1.9, sprintf('the next request for it came %.2f s after the 429 (Retry-After: 2)', $gap));
	my ($first) = grep { $_->{start} > $t429 && $_->{method} ne 'GET' } @log;
	my $hold = defined $first ? $first->{start} - $t429 : 0;
	cmp_ok($hold, '>=', 1.9,
		sprintf('no new request at all went out during the Retry-After (first after %.2f s)', $hold));
	my $c1 = fake_creates($fake, 'tmr1');
	my $c2 = fake_creates($fake, 'tmr2');
	is("$c1 $c2", '1 1', 'both frameworks were created once');
}

# ---------------------------------------------------------------- 2b. a Retry-After of a day
# SPEC §8: a server may not park paidb for longer than paidb.max_retry_after
# (4 s here): asked for 86,400 s (header and Status details), the sync
# worker holds off every new request for 4 s, then sends the job again.
{
	my $n429 = $fake->counters->{responses}{429} // 0;
	$fake->fault(status => 429, retryAfter => 86400, verb => 'create', resource => 'frameworks',
		name => 'capped1', count => 1);
	submit_jobs([ 'capped1', 'ok' ]);
	ok(wait_until(sub { ($fake->counters->{responses}{429} // 0) > $n429 }),
		'the create got 429 with Retry-After: 86400');
	jobs_final('a Retry-After of a day', 'capped1');
	my @log = @{ fake_request_times($fake) };
	my ($t429) = map { $_->{end} } grep { $_->{code} eq '429' } reverse @log;
	my ($next) = grep { $_->{start} > $t429 && $_->{method} ne 'GET' } @log;
	my $gap = defined $next ? $next->{start} - $t429 : -1;
	cmp_ok($gap, '>=', 3.9, sprintf('nothing was sent for paidb.max_retry_after (first request %.2f s after the 429)', $gap));
	ok(defined $next && $gap < 30, 'the sync worker went on within the cap, not after a day');
	is(fake_creates($fake, 'capped1'), 1, 'the framework was created once');
}

# ---------------------------------------------------------------- 3. 410 Gone
{
	# (a) an ERROR event 410 in the stream of the next watch
	my $lists = fake_counter($fake, 'list frameworks');
	$fake->fault(status => 410, verb => 'watch', resource => 'frameworks', inStream => JSON::PP::true, count => 1);
	submit_jobs(map { [ "gone$_", (qw(ok retry fail))[ $_ % 3 ] ] } 1 .. 4);
	$fake->cut_watches('end', 'frameworks');
	ok(wait_until(sub { fake_counter($fake, 'list frameworks') > $lists }), 'a 410 ERROR event makes the watcher list again');
	is_deeply($fake->admin(GET => '/_fake/faults')->{faults}, [], 'the watcher did meet the 410 ERROR event');
	jobs_final('410 ERROR event', map { "gone$_" } 1 .. 4);

	# (b) the watcher falls behind a compaction while frameworks change and
	# one vanishes: the re-list must reconcile all of it
	submit_jobs([ 'vanish1', 'ok', ann => { 'kube-fake/run-seconds' => 'inf' },
		expect => [ 'STOPPED', 0, -210, 0 ] ]);
	ok($node->poll_query_until('postgres',
		q{SELECT state = 'RUNNING' AND request_synced FROM paidb.framework WHERE name = 'vanish1'}),
		'a long-running job runs');
	$lists = fake_counter($fake, 'list frameworks');
	$fake->fault(status => 503, verb => 'watch', resource => 'frameworks', count => -1);
	$fake->cut_watches('reset', 'frameworks');
	# (a retried attempt that the watcher never saw cannot be in history)
	submit_jobs(map { [ "behind$_", (qw(ok retry fail))[ $_ % 3 ],
		$_ % 3 == 1 ? (expect => [ 'SUCCEEDED', 1, 0, undef ]) : () ] } 1 .. 4);
	my $code = fake_delete_directly($fake, 'vanish1');
	is($code, 200, 'a framework is deleted behind paidb\'s back');
	ok(wait_until(sub { !grep { fake_creates($fake, "behind$_") < 1 } 1 .. 4 }), 'the jobs were created meanwhile');
	$fake->compact;
	$fake->clear_faults;
	ok(wait_until(sub { fake_counter($fake, 'list frameworks') > $lists }), 'after falling behind the compaction the watcher lists again');
	ok($node->poll_query_until('postgres',
		q{SELECT state = 'RUNNING' AND request_synced FROM paidb.framework WHERE name = 'vanish1'}),
		'the vanished framework was noticed (synthesised DELETED) and created again');
	is(fake_creates($fake, 'vanish1'), 2, 'it was created a second time, once');
	$node->safe_psql('postgres', q{SELECT paidb.stop_framework('vanish1')});
	jobs_final('fallen behind a compaction', 'vanish1', map { "behind$_" } 1 .. 4);
}

# ---------------------------------------------------------------- 4. watches cut mid-event
{
	my $watches = fake_counter($fake, 'watch frameworks');
	my @names = map { "cut$_" } 1 .. 6;
	submit_jobs(map { [ $_, (qw(ok retry fail))[ substr($_, 3) % 3 ] ] } @names);
	my $cuts = 0;
	for (1 .. 4)
	{
		$fake->wait_for_watches(2, 10);
		$cuts += $fake->cut_watches('mid-event', 'frameworks');
		my $n = fake_counter($fake, 'watch frameworks');
		wait_until(sub { fake_counter($fake, 'watch frameworks') > $n || !%{ not_final(@names) } }, 10);
	}
	cmp_ok($cuts, '>=', 1, "watches were armed to be cut in the middle of an event ($cuts)");
	jobs_final('watch cut mid-event', @names);
	cmp_ok(fake_counter($fake, 'watch frameworks') - $watches, '>=', 2, 'the watcher watched again after the cuts');
}

# ---------------------------------------------------------------- 5. API server refusing for 5 s
{
	my $err0 = sync_status()->{errors};
	my $t_pause = time();
	$fake->pause('refuse', 5);
	my @names = map { "down$_" } 1 .. 6;
	submit_jobs(map { [ $_, (qw(ok retry fail))[ substr($_, 4) % 3 ] ] } @names);
	ok(wait_until(sub { sync_status()->{errors} > $err0 }, 10), 'the sync worker counts the refused connections');
	diag('last_error while refused: ' . sync_status()->{last_error});
	jobs_final('API server down for 5 s', @names);
	my $st = sync_status();
	diag(sprintf('API server back after 5 s: all jobs final %.1f s after the pause began; %d errors',
		time() - $t_pause, $st->{errors} - $err0));
	my @log = grep { $_->{method} eq 'POST' && $_->{target} =~ m{/frameworks(\?|$)} } @{ fake_request_times($fake) };
	my ($first) = grep { $_->{start} > $t_pause } @log;
	# back after 5 s; backoffs of 0.8, 1.6, 3.2 s (+-20%) put the next try before ~9 s
	my $back = defined $first ? $first->{start} - $t_pause : 99;
	cmp_ok($back, '<', 12,
		sprintf('the jobs were created soon after the API server came back (%.1f s after the pause began)', $back));
}

# ---------------------------------------------------------------- 6. permanent refusals
{
	my %perm = (
		perm422 => { status => 422, like => qr/is invalid/,
			message => 'Framework.frameworkcontroller.microsoft.com "perm422" is invalid: spec.taskRoles[0].taskNumber: Invalid value: -1' },
		permre => { status => 500, like => qr/ResourceExhausted/,
			message => 'rpc error: code = ResourceExhausted desc = trying to send message larger than max (3145728 vs. 2097152)' },
		perm413 => { status => 413, like => qr/too large|TooLarge/i },
	);
	for my $n (sort keys %perm)
	{
		my %f = (status => $perm{$n}{status}, verb => 'create', resource => 'frameworks', name => $n, count => -1);
		$f{message} = $perm{$n}{message} if $perm{$n}{message};
		$fake->fault(%f);
	}
	submit_jobs((map { [ $_, 'ok', expect => [ 'FAILED', 0, -1100, 0 ] ] } sort keys %perm), [ 'permok', 'ok' ]);
	jobs_final('permanent refusals', sort keys %perm, 'permok');
	for my $n (sort keys %perm)
	{
		my ($state, $code, $phrase, $type) = split /\|/, $node->safe_psql('postgres', qq{
			SELECT state, app_exit_code,
			       paidb.snapshot(f) #>> '{status,attemptStatus,completionStatus,phrase}',
			       paidb.snapshot(f) #> '{status,attemptStatus,completionStatus,type}'
			  FROM paidb.framework f WHERE name = '$n'});
		is("$state $code $phrase", 'FAILED -1100 CreateFrameworkPermanentFailed',
			"$perm{$n}{status}: $n failed with -1100 CreateFrameworkPermanentFailed");
		is_deeply(decode_json($type), { name => 'Failed', attributes => ['Permanent'] },
			"$n: completion type Failed/Permanent");
		my ($etype, $reason, $msg) = split /\|/, $node->safe_psql('postgres', qq{
			SELECT type, reason, message FROM paidb.framework_event
			 WHERE framework_name = '$n' AND reason = 'CreateFrameworkPermanentFailed'});
		is("@{[ $etype // '' ]} @{[ $reason // '' ]}", 'Warning CreateFrameworkPermanentFailed',
			"$n: a Warning framework_event CreateFrameworkPermanentFailed");
		like($msg // '', $perm{$n}{like}, "$n: the event carries the API server's message");
	}
	like(sync_status()->{last_error}, qr/\b(422|413|500)\b/, 'status() last_error shows the HTTP status');

	# nothing is retried for them afterwards
	my %before = map { $_ => fake_create_attempts($fake, $_) } keys %perm;
	my $lines = scalar(@{ fake_request_times($fake) });
	$node->safe_psql('postgres', 'SELECT paidb.wakeup()');
	# an observation window: the counters must stay still
	wait_until(sub { grep { fake_create_attempts($fake, $_) != $before{$_} } keys %perm }, 3);
	for my $n (sort keys %perm)
	{
		is(fake_create_attempts($fake, $n), 1, "$n: exactly one create attempt, none after the refusal");
	}
	my @later = grep { $_->{target} =~ m{/frameworks/perm(422|re|413)(\?|$)} && $_->{method} ne 'DELETE' }
	  @{ fake_request_times($fake) }[ $lines .. $#{ fake_request_times($fake) } ];
	is(scalar(@later), 0, 'no request was sent for them after the refusal');
	my $all = join(',', map { "'$_'" } keys %perm);
	is($node->safe_psql('postgres',
		"SELECT count(*) FROM paidb.framework WHERE name IN ($all) AND (NOT api_server_deleted OR sync_failures > 0)"),
		'0', 'they left the work list');
	$fake->clear_faults;
}

# ---------------------------------------------------------------- all jobs, all faults
my @all = sort keys %expect;
is_deeply(not_final(@all), {}, 'every job (' . scalar(@all) . ') is in its final state');
my $c = $fake->counters;
my %twice = map { $_ => $c->{creates}{frameworks}{$_} }
  grep { $c->{creates}{frameworks}{$_} > ($_ eq 'vanish1' ? 2 : 1) } keys %{ $c->{creates}{frameworks} };
is_deeply(\%twice, {}, 'no framework was created twice (except the one deleted behind our back)');
my %missing = map { $_ => 1 } grep { !$c->{creates}{frameworks}{$_} && $expect{$_}[2] != -1100 } @all;
is_deeply(\%missing, {}, 'every job that ran was created');
my ($code, $left) = $fake->api(GET => fw_path());
is(scalar(@{ $left->{items} }), 0, 'every completed framework was deleted from the API server');
is($node->safe_psql('postgres', 'SELECT count(*) FROM paidb.orphan'), '0', 'no orphan was queued');
is($node->safe_psql('postgres', 'SELECT count(*) FROM paidb.status() WHERE pid IS NULL'), '0',
	'all workers still run');
cmp_ok(sync_status()->{errors}, '>', 0, 'status() counted errors');
my $status_text = $node->safe_psql('postgres', 'SELECT paidb.status()::text');
unlike($status_text, qr/\Q$token\E/, 'status() never shows the token');
unlike(slurp_file($node->logfile), qr/\Q$token\E/, 'the server log never contains the token');
unlike($fake->output, qr/Traceback/, 'kube-fake reported no internal error');

$node->stop('fast');
done_testing();
