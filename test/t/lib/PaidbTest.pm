# PaidbTest — shared helpers for paidb's end-to-end TAP tests: a node with
# paidb preloaded and pointed at a kube-fake, OpenPAI-like job requests,
# submission, polling with deadlines, and looks into the fake.
#
#   use lib 'test/t/lib';
#   use PaidbTest;
#   my $fake = PaidbTest::start_fake();
#   my $node = PaidbTest::start_node('e2e', $fake, state_log => 1);   # one test
#   my $name = job_name('alice', 'job1');          # md5(user~job)
#   my $req = job_request($name, exit_codes => '1', max_retry => 3);
#   submit($node, $req, add_ons => { configSecretDef => {...} });
#   ok(poll($node, "SELECT state = 'FAILED' FROM paidb.framework WHERE name = '$name'"));
#
# Every wait has a deadline ($PaidbTest::WAIT seconds unless told); nothing
# here sleeps for a fixed time to let something happen.

package PaidbTest;

use strict;
use warnings;

use Carp;
use Cwd qw(abs_path);
use Digest::MD5 qw(md5_hex);
use Exporter 'import';
use IPC::Run;
use JSON::PP;
use KubeFake;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use POSIX ();
use Time::HiRes qw(time usleep);
use Time::Local qw(timegm);

our @EXPORT = qw(job_name job_request bare_framework submit try_submit query poll col
  wait_until lock_wait_settled wait_log fw_path fake_framework fake_object fake_creates
  fake_create_attempts fake_counter fake_requests fake_request_times
  fake_watches fake_delete_directly sql_json
  install_state_log state_log_sql state_path worker_pid wait_for_workers log_since
  worker_exits crash_lines worker_rss job_count_errors_sql job_summary_errors_sql);

# How long any single condition may take to become true (seconds).
our $WAIT = 60;

# How often wait_until tries its condition (seconds).
our $STEP = 0.05;

# Frameworks live in namespace "default" (paidb.k8s_namespace's default).
our $NS = 'default';
our $FW_COLLECTION = "/apis/frameworkcontroller.microsoft.com/v1/namespaces/$NS/frameworks";

my $json = JSON::PP->new->canonical->allow_nonref;

# ---------------------------------------------------------------- set-up

# Start a kube-fake with the simulated controller, bookmarks every second and
# a request log.  Options: dir (default: a new one, so every fake has its own
# log), args (more command line), paused (start the controller paused),
# bookmark_interval, token_file (the fake wants this bearer token).
sub start_fake
{
	my (%o) = @_;
	my $dir = $o{dir} // PostgreSQL::Test::Utils::tempdir;
	my @args = ('--run-seconds', '0.3', '--step-seconds', '0.05');
	push @args, '--controller-paused' if $o{paused};
	push @args, @{ $o{args} } if $o{args};
	my $fake = KubeFake->start(
		dir => $dir,
		simulate_controller => 1,
		bookmark_interval => $o{bookmark_interval} // 1,
		(defined $o{token_file} ? (token_file => $o{token_file}) : ()),
		log => "$dir/kube-fake-requests.log",
		args => \@args);
	return $fake;
}

# A random bearer token, written to a new file (mode 0600) under an absolute
# path: (token, file).
sub new_token
{
	my ($prefix) = @_;
	my $token = ($prefix // 'paidb-token-') . join('', map { ('a' .. 'z')[ rand 26 ] } 1 .. 20);
	my $file = abs_path(PostgreSQL::Test::Utils::tempdir) . '/token';
	PostgreSQL::Test::Utils::append_to_file($file, "$token\n");
	chmod 0600, $file;
	return ($token, $file);
}

my @nodes;

# A node with paidb preloaded, talking to $fake, started, with the extension
# created (unless no_extension).  Options: retain_mode (default on),
# resync_interval (default 3s), watch_timeout (default 30s), token_file
# (paidb.k8s_token_file), restart_after_crash (default on), init (hash ref of
# arguments to init, e.g. { allows_streaming => 1 }), conf (more
# postgresql.conf lines, which win over the ones above), url (the API
# server's URL when it is not $fake's, e.g. a proxy in front of it),
# install_path (run the server of another installation, e.g. a private
# PostgreSQL root holding another paidb build: PostgreSQL::Test::Cluster's
# install_path, its bin/ and lib/ parent).
#
# restart_after_crash is on unless told (the test harness turns it off, a
# real server has it on): a crashing paidb worker then costs a crash
# recovery, not the rest of the test; a test file that keeps it on checks
# the log for crashes at the end.
sub new_node
{
	my ($name, $fake, %o) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name,
		defined $o{install_path} ? (install_path => $o{install_path}) : ());
	$node->init(%{ $o{init} // {} });
	my $retain = $o{retain_mode} // 'on';
	my $resync = $o{resync_interval} // '3s';
	my $watch_timeout = $o{watch_timeout} // '30s';
	my $restart = $o{restart_after_crash} // 'on';
	my $url = $o{url} // $fake->url;
	# PAIDB_TEST_CLUSTER=<name>: the test's jobs run on a cluster of that
	# name instead of "default" (SPEC §11): its row names the fake, the
	# settings name a port nobody listens on, and "default" is removed
	my $cluster = $ENV{PAIDB_TEST_CLUSTER};
	my $cluster_url = $url;
	$url = 'http://127.0.0.1:9' if $cluster && !$o{no_extension};
	my $token = defined $o{token_file} ? "paidb.k8s_token_file = '$o{token_file}'\n" : '';
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'paidb'
paidb.database = 'postgres'
paidb.k8s_api_server = '$url'
${token}paidb.resync_interval = '$resync'
paidb.watch_timeout = '$watch_timeout'
paidb.retain_mode = $retain
restart_after_crash = $restart
} . ($cluster && !$o{no_extension} ? "paidb.default_cluster = '$cluster'\n" : '') . ($o{conf} // ''));
	$node->start;
	push @nodes, $node;
	$node->safe_psql('postgres', 'CREATE EXTENSION paidb CASCADE') unless $o{no_extension};
	if ($cluster && !$o{no_extension})
	{
		$node->safe_psql('postgres', qq{INSERT INTO paidb.cluster (name, api_server) VALUES ('$cluster', '$cluster_url');
			SELECT paidb.remove_cluster('default')});
	}
	return $node;
}

# new_node (same options), then install_state_log if state_log, then one
# test: the three workers run and both watchers watch.
sub start_node
{
	my ($name, $fake, %o) = @_;
	my $node = new_node($name, $fake, %o);
	install_state_log($node) if $o{state_log};
	ok(wait_for_workers($node), 'the three paidb workers run and both watchers watch');
	return $node;
}

# A test that died half-way (or whose server died) must not make the
# harness's own clean-up bail out of the whole run ("pg_ctl stop failed"):
# stop our nodes first, tolerating a server that is gone.  (This END runs
# before PostgreSQL::Test::Cluster's, which was loaded first.)
END
{
	local $?;
	for my $node (@nodes)
	{
		eval { $node->stop('immediate', fail_ok => 1); };
	}
}

# ---------------------------------------------------------------- jobs

# OpenPAI's framework name: md5 of "user~job" (32 lower-case hex digits), so
# the event watcher takes the pods' events too.
sub job_name
{
	my ($user, $job) = @_;
	return md5_hex("$user~$job");
}

# An OpenPAI-like framework request.  Options: user, job (for labels and the
# config), task_roles (array of [name, taskNumber], default [['taskrole', 1]]),
# max_retry (spec.retryPolicy.maxRetryCount, default 0), exit_codes,
# run_seconds, step_seconds, hold_state (kube-fake annotations), config
# (YAML text of annotation "config"; default: a minimal OpenPAI config),
# annotations (more), pod_spec_extra (hash merged into every pod spec),
# execution_type (default Start).
sub job_request
{
	my ($name, %o) = @_;
	my $user = $o{user} // 'alice';
	my $job = $o{job} // $name;
	my %ann = (
		jobName => $job,
		totalGpuNumber => '0',
		logPathInfix => "$user/$job",
		config => $o{config} // "protocolVersion: 2\nname: $job\ntype: job\n",
	);
	$ann{'kube-fake/exit-codes'} = $o{exit_codes} if defined $o{exit_codes};
	$ann{'kube-fake/run-seconds'} = $o{run_seconds} if defined $o{run_seconds};
	$ann{'kube-fake/step-seconds'} = $o{step_seconds} if defined $o{step_seconds};
	$ann{'kube-fake/hold-state'} = $o{hold_state} if defined $o{hold_state};
	%ann = (%ann, %{ $o{annotations} }) if $o{annotations};
	my @roles;
	for my $r (@{ $o{task_roles} // [ [ 'taskrole', 1 ] ] })
	{
		my ($rn, $n) = @$r;
		push @roles, {
			name => $rn,
			taskNumber => $n,
			frameworkAttemptCompletionPolicy => { minFailedTaskCount => 1, minSucceededTaskCount => -1 },
			task => {
				retryPolicy => { fancyRetryPolicy => JSON::PP::false, maxRetryCount => 0 },
				podGracefulDeletionTimeoutSec => 1800,
				pod => {
					metadata => { labels => { userName => $user, jobName => $job, type => 'kube-launcher-task' } },
					spec => {
						restartPolicy => 'Never',
						containers => [ { name => 'app', image => 'ubuntu:18.04',
							command => [ 'sh', '-c', 'echo success' ] } ],
						%{ $o{pod_spec_extra} // {} },
					},
				},
			},
		};
	}
	return {
		apiVersion => 'frameworkcontroller.microsoft.com/v1',
		kind => 'Framework',
		metadata => {
			name => $name,
			labels => { userName => $user, virtualCluster => 'default', jobName => $job, type => 'kube-launcher' },
			annotations => \%ann,
		},
		spec => {
			executionType => $o{execution_type} // 'Start',
			retryPolicy => { fancyRetryPolicy => JSON::PP::false, maxRetryCount => $o{max_retry} // 0 },
			taskRoles => \@roles,
		},
	};
}

# A bare framework request (not OpenPAI-like): labels of user alice, one task
# role "worker" of busybox.  Options: annotations (hash), task_number
# (default 1), max_retry (spec.retryPolicy.maxRetryCount, default 0).
sub bare_framework
{
	my ($name, %o) = @_;
	return {
		apiVersion => 'frameworkcontroller.microsoft.com/v1',
		kind => 'Framework',
		metadata => {
			name => $name,
			labels => { userName => 'alice', virtualCluster => 'default' },
			annotations => $o{annotations} // {},
		},
		spec => {
			executionType => 'Start',
			retryPolicy => { fancyRetryPolicy => JSON::PP::false, maxRetryCount => $o{max_retry} // 0 },
			taskRoles => [ {
				name => 'worker',
				taskNumber => $o{task_number} // 1,
				task => {
					retryPolicy => { fancyRetryPolicy => JSON::PP::false, maxRetryCount => 0 },
					pod => { spec => { containers => [ { name => 'worker', image => 'busybox' } ] } },
				},
			} ],
		},
	};
}

# A text value as an SQL string literal; NULL for undef.
sub sql_literal
{
	my ($s) = @_;
	return 'NULL' unless defined $s;
	$s =~ s/'/''/g;
	return "'$s'";
}

# A Perl value as a jsonb literal for SQL (dollar-quoted).
sub sql_json
{
	my ($v) = @_;
	my $text = ref $v ? $json->encode($v) : $v;
	croak 'JSON contains the quote tag $J$' if $text =~ /\$J\$/;
	return "\$J\$$text\$J\$::jsonb";
}

# The SQL of a submission (put_framework_request).
sub _submit_sql
{
	my ($req, %o) = @_;
	my $time = defined $o{submission_time} ? "'$o{submission_time}'::timestamptz" : 'now()';
	my $addons = sql_json($o{add_ons} // {});
	return "SELECT name, request_generation, created, changed FROM paidb.put_framework_request("
	  . sql_json($req) . ", $time, $addons)";
}

# Submit a request; dies on error.  Returns {name, request_generation,
# created, changed}.  Options: add_ons (hash of add-on definitions),
# submission_time.
sub submit
{
	my ($node, $req, %o) = @_;
	my $out = query($node, _submit_sql($req, %o));
	my ($name, $gen, $created, $changed) = split /\|/, $out;
	return { name => $name, request_generation => $gen, created => $created, changed => $changed };
}

# Submit a request without dying: (psql exit code, stdout, stderr).
sub try_submit
{
	my ($node, $req, %o) = @_;
	my ($out, $err) = ('', '');
	# psql that cannot connect (a server restarting) may exit before it has
	# read its input: IPC::Run then dies of EPIPE; that is a refusal too
	my $ret = eval { $node->psql('postgres', _submit_sql($req, %o), stdout => \$out, stderr => \$err) };
	if (!defined $ret)
	{
		$err .= $@;
		$ret = 2;
	}
	return ($ret, $out, $err);
}

# One query on database postgres, like safe_psql (dies on an error), except
# that a server in crash recovery or restarting is waited for (up to $WAIT
# seconds) instead of failing the test at once.
sub query
{
	my ($node, $sql) = @_;
	my $deadline = time() + $WAIT;
	while (1)
	{
		my ($out, $err) = ('', '');
		my $ret = eval { $node->psql('postgres', $sql, stdout => \$out, stderr => \$err, on_error_stop => 1) };
		$err .= $@ if !defined $ret;
		return $out if defined $ret && $ret == 0;
		my $down = !defined $ret || $ret == 2
		  || $err =~ /the database system is (in recovery mode|starting up|shutting down|not yet accepting connections)|terminating connection because of crash|server closed the connection unexpectedly|could not connect|connection to server .* failed/;
		croak "query failed: $err\nwhile running: $sql" unless $down && time() < $deadline;
		usleep(100_000);
	}
}

# Run a query until its output equals $expected (default 't'), for at most
# $secs seconds.  Connection failures (a restarting server) count as "not
# yet".  On timeout: diag of the query, the expectation and the last output.
sub poll
{
	my ($node, $sql, $expected, $secs) = @_;
	$expected //= 't';
	my $deadline = time() + ($secs // $WAIT);
	my $cmd = [ $node->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=1',
		'-d', $node->connstr('postgres') ];
	my ($out, $err) = ('', '');
	while (1)
	{
		($out, $err) = ('', '');
		# a server that is down or restarting: not yet (psql may even die
		# before reading its input)
		eval { IPC::Run::run($cmd, '<', \$sql, '>', \$out, '2>', \$err); };
		$err .= $@ if $@;
		chomp $out;
		chomp $err;
		return 1 if $out eq $expected && $err eq '';
		last if time() > $deadline;
		usleep(100_000);
	}
	diag("poll timed out after " . ($secs // $WAIT) . " s:\n$sql\nexpected: $expected\nlast output: $out\nstderr: $err");
	return 0;
}

# Poll a Perl condition until it is true or $secs pass; returns its value.
sub wait_until
{
	my ($cond, $secs) = @_;
	my $deadline = time() + ($secs // $WAIT);
	while (1)
	{
		my $v = $cond->();
		return $v if $v;
		return 0 if time() > $deadline;
		usleep($STEP * 1_000_000);
	}
}

# Wait until backend $pid, running a statement that contains $what, waits
# for a lock ('waits') or has finished it ('done'); 'timed out' after $secs.
sub lock_wait_settled
{
	my ($node, $pid, $what, $secs) = @_;
	my $deadline = time() + ($secs // $WAIT);
	while (time() < $deadline)
	{
		my $s = $node->safe_psql('postgres',
			"SELECT CASE WHEN wait_event_type = 'Lock' THEN 'waits' WHEN state LIKE 'idle%' THEN 'done' END
			   FROM pg_stat_activity WHERE pid = $pid AND strpos(query, '$what') > 0");
		return $s if $s ne '';
		usleep(100_000);
	}
	return 'timed out';
}

# Wait until the server log from byte $offset on matches $re (true if it did).
sub wait_log
{
	my ($node, $re, $offset, $secs) = @_;
	return wait_until(sub { log_since($node, $offset) =~ $re }, $secs);
}

# ---------------------------------------------------------------- the fake

# API path of one framework (or the collection).
sub fw_path
{
	my ($name) = @_;
	return defined $name ? "$FW_COLLECTION/$name" : $FW_COLLECTION;
}

# GET a framework from the fake: the object, or undef on 404.
sub fake_framework
{
	my ($fake, $name) = @_;
	return fake_object($fake, fw_path($name));
}

# Lift the kube-fake/hold-state annotation of a framework in a fake, so that
# it runs on to its end; the HTTP status of the merge patch.
sub fake_release_hold
{
	my ($fake, $name) = @_;
	my ($code) = $fake->api(PATCH => fw_path($name),
		{ metadata => { annotations => { 'kube-fake/hold-state' => undef } } },
		'application/merge-patch+json');
	return $code;
}

# GET any object from the fake: the object, or undef on 404 (dies otherwise).
sub fake_object
{
	my ($fake, $path) = @_;
	my ($code, $obj) = $fake->api(GET => $path);
	return undef if $code == 404;
	croak "GET $path from kube-fake: HTTP $code" unless $code == 200;
	return $obj;
}

# Successful (201) creates of an object name in the fake (resource default frameworks).
sub fake_creates
{
	my ($fake, $name, $resource) = @_;
	return $fake->counters->{creates}{ $resource // 'frameworks' }{$name} // 0;
}

# Every create request of an object name, faulted and refused ones included.
sub fake_create_attempts
{
	my ($fake, $name, $resource) = @_;
	return $fake->counters->{createAttempts}{ $resource // 'frameworks' }{$name} // 0;
}

# A request counter ("list frameworks", "watch frameworks", "delete frameworks"…).
sub fake_counter
{
	my ($fake, $key) = @_;
	return $fake->counters->{requests}{$key} // 0;
}

# Requests the fake has logged so far (a line is written when a request
# ends; a watch still open is not there yet), optionally only those whose
# method matches $method and whose target matches the regex $target: a list
# of [method, target, status] (status: the HTTP code, or for a watch how its
# stream ended).
sub fake_requests
{
	my ($fake, $method, $target) = @_;
	my @out;
	open(my $fh, '<', $fake->{request_log}) or return ();
	while (my $line = <$fh>)
	{
		my (undef, $m, $t, $code) = split ' ', $line;
		next unless defined $code;
		next if defined $method && $m ne $method;
		next if defined $target && $t !~ $target;
		push @out, [ $m, $t, $code ];
	}
	close($fh);
	return @out;
}

# Requests the fake has logged so far with their times: [{start, end, method,
# target, code}] (a line is written when the answer has been sent, so start =
# end - duration).
sub fake_request_times
{
	my ($fake) = @_;
	my @out;
	open(my $fh, '<', $fake->{request_log}) or return [];
	while (my $line = <$fh>)
	{
		next unless $line =~ /^(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)(\.\d+)?Z (\S+) (\S+) (\S+) ([\d.]+)ms$/;
		my $end = timegm($6, $5, $4, $3, $2 - 1, $1) + ($7 // 0);
		push @out, { end => $end, start => $end - $11 / 1000, method => $8,
			target => $9, code => $10 };
	}
	close($fh);
	return \@out;
}

# Delete a framework directly in the API server with a deletecollection by
# name (verb "deletecollection": faults on "delete" do not catch it), as
# someone would behind paidb's back; returns the HTTP status.
sub fake_delete_directly
{
	my ($fake, $name) = @_;
	my ($code) = $fake->api(DELETE => fw_path() . "?fieldSelector=metadata.name%3D$name");
	return $code;
}

# How many watches of a resource (default frameworks) are open in the fake.
sub fake_watches
{
	my ($fake, $resource) = @_;
	$resource //= 'frameworks';
	return scalar grep { $_->{resource} eq $resource } @{ $fake->watches };
}

# ---------------------------------------------------------------- the node

# Record every state a job goes through: a trigger on paidb.framework writes
# public.state_log whenever a row is inserted or its state changes, so a test
# can check the whole path (WAITING -> RUNNING -> SUCCEEDED) however fast the
# job was.
sub install_state_log
{
	my ($node) = @_;
	$node->safe_psql('postgres', state_log_sql());
	return;
}

# The SQL of install_state_log (to run it inside another transaction).
sub state_log_sql
{
	return q{
CREATE TABLE public.state_log (
    id bigserial PRIMARY KEY,
    name text NOT NULL,
    state text,
    sub_state text,
    at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION public.log_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.state_log (name, state, sub_state) VALUES (NEW.name, NEW.state, NEW.sub_state);
    RETURN NULL;
END $$;
CREATE TRIGGER log_state_insert AFTER INSERT ON paidb.framework
    FOR EACH ROW EXECUTE FUNCTION public.log_state();
CREATE TRIGGER log_state_update AFTER UPDATE ON paidb.framework
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION public.log_state();
};
}

# How many (user, virtual cluster, state, priority, archived) groups
# paidb.job_counts disagrees with count(*) of paidb.framework in (one
# statement: one snapshot).
sub job_count_errors_sql
{
	return q{SELECT count(*) FROM (
 (SELECT user_name, virtual_cluster, state, job_priority, archived, count(*) AS n
    FROM paidb.framework GROUP BY 1, 2, 3, 4, 5
  EXCEPT SELECT user_name, virtual_cluster, state, job_priority, archived, n FROM paidb.job_counts)
 UNION ALL
 (SELECT user_name, virtual_cluster, state, job_priority, archived, n FROM paidb.job_counts
  EXCEPT SELECT user_name, virtual_cluster, state, job_priority, archived, count(*)
    FROM paidb.framework GROUP BY 1, 2, 3, 4, 5)) e};
}

# How many rows paidb.job_summary and paidb.framework's listed columns
# differ in.
sub job_summary_errors_sql
{
	my $cols = q{name, job_name, user_name, execution_type, submission_time, creation_time,
  launch_time, virtual_cluster, total_gpu_number, total_task_number, total_task_role_number,
  job_priority, retries, retry_delay_time, platform_retries, resource_retries, user_retries,
  completion_time, app_exit_code, sub_state, state, archived};
	return qq{SELECT count(*) FROM (
 (SELECT $cols FROM paidb.framework EXCEPT SELECT * FROM paidb.job_summary)
 UNION ALL
 (SELECT * FROM paidb.job_summary EXCEPT SELECT $cols FROM paidb.framework)) e};
}

# The states a job went through, e.g. "WAITING RUNNING SUCCEEDED".
sub state_path
{
	my ($node, $name) = @_;
	my $s = query($node,
		"SELECT string_agg(coalesce(state, 'NULL'), ' ' ORDER BY id) FROM public.state_log WHERE name = '$name'");
	return $s;
}

# A column (or expression) of one job's row.
sub col
{
	my ($node, $name, $expr) = @_;
	return query($node, "SELECT $expr FROM paidb.framework f WHERE name = '$name'");
}

# The pid of a paidb worker ('sync', 'framework watcher', 'event watcher'), or 0.
sub worker_pid
{
	my ($node, $worker) = @_;
	return query($node,
		"SELECT coalesce(pid, 0) FROM paidb.status() WHERE worker = '$worker'");
}

# Wait until the three workers run (have a pid that is a live backend in
# pg_stat_activity) and both watchers are watching (their LIST, or the
# initial import, is done: from now on every event reaches the database);
# with %old (worker => pid), until each has a new pid.
sub wait_for_workers
{
	my ($node, %old) = @_;
	my @cond;
	for my $w ('sync', 'framework watcher', 'event watcher')
	{
		my $c = "(SELECT s.pid IS NOT NULL AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = s.pid)";
		$c .= " AND s.state = 'watching'" if $w ne 'sync';
		$c .= " AND s.pid <> $old{$w}" if $old{$w};
		$c .= " FROM paidb.status() s WHERE s.worker = '$w')";
		push @cond, $c;
	}
	return poll($node, 'SELECT ' . join(' AND ', @cond));
}

# The server log from byte $offset on.
sub log_since
{
	my ($node, $offset) = @_;
	return PostgreSQL::Test::Utils::slurp_file($node->logfile, $offset // 0);
}

# How many times a paidb worker ('framework watcher'...) exited, by the server
# log (from byte $offset on, default the whole log).
sub worker_exits
{
	my ($node, $worker, $offset) = @_;
	my @exits = (log_since($node, $offset)
		  =~ /background worker "paidb \Q$worker\E" \(PID \d+\) exited with exit code/g);
	return scalar(@exits);
}

# The server log lines that tell of a crashed process (a signal other than
# the SIGKILLs a test sent itself when allow_kill, an assertion, a PANIC),
# each with the line after it (which says what the process was doing).
# Option offset: only the log from that byte on.
sub crash_lines
{
	my ($node, %o) = @_;
	my @lines = split /\n/, log_since($node, $o{offset});
	my @out;
	for my $i (0 .. $#lines)
	{
		next unless $lines[$i] =~ /TRAP:|terminated by signal|PANIC|terminating any other active server processes/;
		next if $o{allow_kill}
		  && $lines[$i] =~ /terminated by signal 9: Killed|terminating any other active server processes/;
		push @out, $lines[$i];
		push @out, $lines[ $i + 1 ] if $i < $#lines && $lines[ $i + 1 ] =~ /DETAIL/;
	}
	return @out;
}

# ---------------------------------------------------------------- memory

# The pid of a node's postmaster (from postmaster.pid), or undef.
sub _postmaster_pid
{
	my ($node) = @_;
	open(my $fh, '<', $node->data_dir . '/postmaster.pid') or return undef;
	my $pid = <$fh>;
	close($fh);
	return defined $pid && $pid =~ /^(\d+)/ ? $1 : undef;
}

# The paidb workers of a node, from /proc: {pid => worker name} for every
# child of the postmaster whose process title names a paidb worker.
sub _worker_pids
{
	my ($postmaster) = @_;
	my %out;
	return \%out unless $postmaster;
	opendir(my $dh, '/proc') or return \%out;
	for my $pid (grep { /^\d+$/ } readdir $dh)
	{
		open(my $st, '<', "/proc/$pid/stat") or next;
		my $stat = <$st> // '';
		close($st);
		next unless $stat =~ /\) \S (\d+) / && $1 == $postmaster;
		open(my $cl, '<', "/proc/$pid/cmdline") or next;
		my $cmd = <$cl> // '';
		close($cl);
		$out{$pid} = $1 if $cmd =~ /paidb (sync|framework watcher|event watcher)/;
	}
	closedir($dh);
	return \%out;
}

# RssAnon (kB) of a process, or undef when it is gone.
sub _rss_anon
{
	my ($pid) = @_;
	open(my $fh, '<', "/proc/$pid/status") or return undef;
	local $/;
	my $s = <$fh> // '';
	close($fh);
	return $s =~ /^RssAnon:\s+(\d+) kB/m ? $1 : undef;
}

# Private memory (RssAnon, kB) of each paidb worker now: {worker name => kB}.
sub worker_rss
{
	my ($node) = @_;
	my $pids = _worker_pids(_postmaster_pid($node));
	my %out;
	for my $pid (keys %$pids)
	{
		my $kb = _rss_anon($pid);
		$out{ $pids->{$pid} } = $kb if defined $kb && $kb > ($out{ $pids->{$pid} } // -1);
	}
	return \%out;
}

my @samplers;

# Start a process that samples the RssAnon of the node's paidb workers every
# 20 ms (the list of workers every 0.5 s, so restarted ones are followed)
# and keeps the peak of each since the last reset.  Returns an object with
# ->reset, ->peak ({worker name => kB}) and ->stop.  A short spike between
# two samples can be missed; what this catches is memory held for longer.
sub rss_sampler
{
	my ($node) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir;
	my $postmaster = _postmaster_pid($node);
	my $parent = $$;
	my $pid = fork();
	croak "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		my (%peak, $pids);
		my $refreshed = 0;
		my $end = time() + 3600;
		while (time() < $end && getppid() == $parent)
		{
			if (-e "$dir/reset")
			{
				%peak = ();
				unlink "$dir/peak";
				unlink "$dir/reset";
				open(my $a, '>', "$dir/reset-done");
				close($a);
			}
			if (time() - $refreshed > 0.5)
			{
				$pids = _worker_pids($postmaster);
				$refreshed = time();
			}
			my $changed = 0;
			for my $p (keys %$pids)
			{
				my $kb = _rss_anon($p) // next;
				my $w = $pids->{$p};
				if ($kb > ($peak{$w} // -1)) { $peak{$w} = $kb; $changed = 1; }
			}
			if ($changed || !-e "$dir/peak")
			{
				open(my $fh, '>', "$dir/peak.tmp") or POSIX::_exit(1);
				print $fh "$_\t$peak{$_}\n" for sort keys %peak;
				close($fh);
				rename "$dir/peak.tmp", "$dir/peak";
			}
			usleep(20_000);
		}
		POSIX::_exit(0);
	}
	my $self = bless { pid => $pid, dir => $dir }, 'PaidbTest::RssSampler';
	push @samplers, $self;
	return $self;
}

package PaidbTest::RssSampler;

use Time::HiRes qw(time usleep);

# Forget the peaks so far (waits until the sampler has done so).
sub reset
{
	my ($self) = @_;
	unlink "$self->{dir}/reset-done";
	open(my $fh, '>', "$self->{dir}/reset");
	close($fh);
	my $deadline = time() + 10;
	usleep(10_000) until -e "$self->{dir}/reset-done" || time() > $deadline;
	return;
}

# The peak RssAnon (kB) of each worker since the last reset.
sub peak
{
	my ($self) = @_;
	my %out;
	open(my $fh, '<', "$self->{dir}/peak") or return \%out;
	while (my $l = <$fh>)
	{
		chomp $l;
		my ($w, $kb) = split /\t/, $l;
		$out{$w} = $kb;
	}
	close($fh);
	return \%out;
}

# Stop the sampler.
sub stop
{
	my ($self) = @_;
	my $pid = delete $self->{pid} or return;
	kill 'TERM', $pid;
	waitpid($pid, 0);
	return;
}

package PaidbTest;

END
{
	local $?;
	$_->stop for @samplers;
}

1;
