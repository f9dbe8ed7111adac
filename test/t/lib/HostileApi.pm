
# HostileApi — start and drive test/hostile-api/hostile-api (a misbehaving
# API server in front of a kube-fake) from TAP tests, and run one hostile
# scenario against a paidb node with every check of issue 8.
#
#   use HostileApi;
#   my $fake = PaidbTest::start_fake(token_file => $tf);
#   my $hostile = HostileApi->start($fake);
#   my $node = PaidbTest::start_node('h', $fake, url => $hostile->url, ...);
#   my $h = HostileApi::harness($node, $fake, $hostile, token => $token);
#   $h->scenario('watch_garbage');
#
# Every hostile-api started is stopped when the test ends.

package HostileApi;

use strict;
use warnings;

use Carp;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use HTTP::Tiny;
use JSON::PP;
use POSIX ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use PaidbTest;

my @running;
my $json = JSON::PP->new->canonical->allow_nonref;

# Path of the program: $ENV{HOSTILE_API}, or next to this module's tree.
sub program
{
	return $ENV{HOSTILE_API} if $ENV{HOSTILE_API};
	return abs_path(dirname(__FILE__) . '/../../hostile-api/hostile-api');
}

# Start a hostile-api in front of a KubeFake (plain http).
sub start
{
	my ($class, $fake, %o) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir;
	my @args = (program(), '--upstream', $fake->url,
		'--port-file', "$dir/port", '--admin-port-file', "$dir/admin",
		'--trap-port-file', "$dir/trap");
	my $pid = fork();
	croak "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		open(STDIN, '<', '/dev/null');
		open(STDOUT, '>>', "$dir/out") or POSIX::_exit(126);
		open(STDERR, '>&', \*STDOUT) or POSIX::_exit(126);
		exec(@args) or POSIX::_exit(127);
	}
	my $self = bless { pid => $pid, dir => $dir }, $class;
	push @running, $self;
	my $deadline = time() + 30;
	until (-e "$dir/port")
	{
		croak "hostile-api exited at start: " . $self->output
		  if waitpid($pid, POSIX::WNOHANG()) == $pid;
		croak "hostile-api did not listen in time" if time() > $deadline;
		usleep(20_000);
	}
	for my $f (qw(port admin trap))
	{
		$self->{$f} = (split /\n/, PostgreSQL::Test::Utils::slurp_file("$dir/$f"))[0];
	}
	return $self;
}

# Base URL of the API port.
sub url { return "http://127.0.0.1:$_[0]->{port}"; }

# What the program printed (its log: mode switches, refused requests).
sub output
{
	my ($self) = @_;
	return -e "$self->{dir}/out" ? PostgreSQL::Test::Utils::slurp_file("$self->{dir}/out") : '';
}

# Call the admin API; returns the decoded answer.
sub admin
{
	my ($self, $method, $path) = @_;
	my $res = HTTP::Tiny->new(timeout => 60)->request($method, "http://127.0.0.1:$self->{admin}$path");
	croak "hostile-api admin $method $path: $res->{status} $res->{content}" unless $res->{success};
	return $json->decode($res->{content});
}

# Switch to a mode (options: classes => 'list,watch', resource => 'frameworks').
sub mode
{
	my ($self, $name, %o) = @_;
	my $q = "name=$name";
	$q .= "&classes=$o{classes}" if $o{classes};
	$q .= "&resource=$o{resource}" if $o{resource};
	return $self->admin(POST => "/mode?$q");
}

# How many requests were recorded so far.
sub request_count { return $_[0]->admin(GET => '/mode')->{requests}; }

# The requests recorded from index $since on: [{method, target, class,
# resource, mode, bad_segments, dangerous}].
sub requests
{
	my ($self, $since) = @_;
	return $self->admin(GET => '/requests?since=' . ($since // 0))->{requests};
}

# Everything that reached the trap port: [{request, headers: [[k, v]…]}].
sub trap { return $_[0]->admin(GET => '/trap')->{trap}; }

# Stop it: SIGTERM, then SIGKILL.
sub stop
{
	my ($self) = @_;
	my $pid = delete $self->{pid} or return;
	kill 'TERM', $pid;
	my $deadline = time() + 10;
	while (time() < $deadline)
	{
		return if waitpid($pid, POSIX::WNOHANG()) == $pid;
		usleep(20_000);
	}
	kill 'KILL', $pid;
	waitpid($pid, 0);
	return;
}

END
{
	local $?;
	$_->stop for @running;
}

# ---------------------------------------------------------------- scenarios

# A scenario runner for one node: harness($node, $fake, $hostile, token =>
# T, canary => NAME).  The canary is a running job whose framework must never
# be created again (a malformed LIST must not reset it).
sub harness
{
	my ($node, $fake, $hostile, %o) = @_;
	return bless { node => $node, fake => $fake, hostile => $hostile,
		sampler => PaidbTest::rss_sampler($node), n => 0, %o }, 'HostileApi::Harness';
}

package HostileApi::Harness;

use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time usleep);
use PaidbTest;

# PAIDB_TEST_MEMORY_FACTOR and PAIDB_TEST_SLOW (set by test/suites/90_asan.sh:
# shadow memory and redzones multiply a worker's RSS, and everything is slower).
our $MEMORY_FACTOR = $ENV{PAIDB_TEST_MEMORY_FACTOR} // 1;
our $SLOW = $ENV{PAIDB_TEST_SLOW} // 1;

# Memory limits (MB of RssAnon): during a scenario, and once it is over.
our $PEAK_MB = 256 * $MEMORY_FACTOR;
our $AFTER_MB = 96 * $MEMORY_FACTOR;

# How long paidb may take to recover once the server is sane (watch backoff
# is at most 30 s; a job's retry backoff too).
our $RECOVER_SECS = ($ENV{PAIDB_HOSTILE_RECOVER_SECS} // 90) * $SLOW;

my %WATCHERS = ('framework watcher' => 1, 'event watcher' => 1);

# status() of the workers: {worker => {errors, last_error, state, pid}}.
sub status
{
	my ($self) = @_;
	my %out;
	for my $l (split /\n/, PaidbTest::query($self->{node},
		q{SELECT worker, coalesce(errors, 0), coalesce(pid, 0), coalesce(state, ''),
		         replace(coalesce(last_error, ''), E'\n', ' ') FROM paidb.status()}))
	{
		my ($w, $e, $p, $s, $le) = split /\|/, $l, 5;
		$out{$w} = { errors => $e, pid => $p, state => $s, last_error => $le // '' };
	}
	return \%out;
}

# The whole of status() as text (to look for the token).
sub status_text
{
	my ($self) = @_;
	return PaidbTest::query($self->{node}, 'SELECT * FROM paidb.status()');
}

# Run one scenario in a subtest: switch the API server to $mode, submit a
# job, wait until paidb has met the misbehaviour (trigger: hostile answers
# of the given classes) and the workers named in `error` count an error,
# then switch back to sane and check recovery.  Options:
#   trigger  => 'create,patch' (classes counted; default by mode), min => 2
#   error    => [workers that must count an error] (default by mode; [] none)
#   secs     => longest wait for each of the two (default 10 s)
#   classes, resource: passed to the mode
#   canary_may_change: the mode may rightly make paidb re-create the canary
#   at_start => code run as the hostile phase begins (more submissions)
#   until    => code ($self, first request index) that must become true
#               before the hostile phase ends (bounded by secs), and
#   until_what => what it tells (a test name)
#   hold     => seconds to stay hostile once paidb has met it (default 0)
#   check    => code run at the end of the hostile phase, given ($self,
#               index of the first request of the scenario, seconds hostile)
sub scenario
{
	my ($self, $mode, %o) = @_;
	my ($node, $fake, $hostile) = @$self{qw(node fake hostile)};
	my $watch_mode = $mode =~ /^(list|watch)_/;
	my @trigger = split /,/, ($o{trigger} // ($mode =~ /^list_/ ? 'list' : $watch_mode ? 'watch' : 'create,patch'));
	my $min = $o{min} // 2;
	my @error = @{ $o{error} // ($watch_mode ? ['framework watcher'] : ['sync']) };
	my $secs = ($o{secs} // 10) * $SLOW;

	Test::More::subtest($mode => sub {
		my $t0 = time();
		my $log_off = -s $node->logfile;
		my $req_off = $hostile->request_count;
		my $before = $self->status;
		my $canary_attempts = defined $self->{canary}
		  ? fake_create_attempts($fake, $self->{canary}) : undef;
		$self->{sampler}->reset;

		my $t_hostile = time();
		$hostile->mode($mode, ($o{classes} ? (classes => $o{classes}) : ()),
			($o{resource} ? (resource => $o{resource}) : ()));
		# watches open now end cleanly (paidb watches again at once and
		# meets the new mode)
		$fake->cut_watches('end');
		my $job = 'hostile' . ++$self->{n} . substr(job_name('mallory', $mode), 0, 8);
		submit($node, job_request($job, run_seconds => '0.2', step_seconds => '0.02'));
		$o{at_start}->($self) if $o{at_start};

		# the hostile phase: paidb meets the misbehaviour and says so
		my $met = PaidbTest::wait_until(sub {
			my $n = grep { my $r = $_; $r->{mode} ne 'sane' && grep { $_ eq $r->{class} } @trigger }
			  @{ $hostile->requests($req_off) };
			return $n >= $min;
		}, $secs);
		ok($met, "paidb met the misbehaviour ($min hostile answers to @trigger)");
		my $now;
		my $counted = PaidbTest::wait_until(sub {
			$now = $self->status;
			return !grep { ($now->{$_}{errors} // 0) <= ($before->{$_}{errors} // 0) } @error;
		}, $secs);
		ok($counted, "status() counts an error of: @error") if @error;
		for my $w (@error)
		{
			isnt($now->{$w}{last_error}, '', "status() shows $w\'s last error")
			  and note("$w: $now->{$w}{last_error}");
		}
		ok(PaidbTest::wait_until(sub { $o{until}->($self, $req_off) }, $secs), $o{until_what})
		  if $o{until};
		usleep($o{hold} * 1_000_000) if $o{hold};
		$o{check}->($self, $req_off, time() - $t_hostile) if $o{check};
		# sane again: paidb recovers by itself
		$hostile->mode('sane');
		ok(poll($node, "SELECT state = 'SUCCEEDED' FROM paidb.framework WHERE name = '$job'", 't', $RECOVER_SECS),
			'a job submitted during the hostile phase reaches the API server and its status comes back')
		  or diag("job $job: " . query($node, "SELECT state, sub_state, request_synced, sync_failures, api_server_deleted FROM paidb.framework WHERE name = '$job'")
			. "\nin the API server: " . JSON::PP->new->canonical->encode([ map { $_ ? { rv => $_->{metadata}{resourceVersion}, gen => $_->{metadata}{generation}, state => ($_->{status} // {})->{state} } : undef } fake_framework($fake, $job) ])
			. "\nwatches: " . JSON::PP->new->canonical->encode($fake->watches)
			. "\nstatus():\n" . $self->status_text . "\nlast requests:\n"
			. join("\n", map { "$_->{method} $_->{target} ($_->{mode})" } @{ $hostile->requests($req_off) }[-15 .. -1]));
		is(fake_creates($fake, $job), 1, 'and its framework was created once');
		ok(wait_for_workers($node), 'the workers run and both watchers watch again');
		my $after;
		ok(PaidbTest::wait_until(sub {
			$after = worker_rss($node);
			return 3 == grep { $after->{$_} < $AFTER_MB * 1024 } keys %$after;
		}, 20 * $SLOW), "the workers' memory is back under $AFTER_MB MB")
		  or diag(explain($after));

		# memory: the peak over the hostile phase and the recovery
		my $peak = $self->{sampler}->peak;
		for my $w (sort keys %$peak)
		{
			cmp_ok($peak->{$w}, '<', $PEAK_MB * 1024, "$w: peak RssAnon during the scenario under $PEAK_MB MB")
			  or diag("$w peaked at $peak->{$w} kB");
		}

		# nothing crashed, nothing leaked, nothing dangerous was sent
		my @crash = crash_lines($node, offset => $log_off);
		is(scalar(@crash), 0, 'no crash in the server log') or diag(join("\n", @crash));
		for my $w ('sync', 'framework watcher', 'event watcher')
		{
			is(worker_exits($node, $w, $log_off), 0, "the $w did not exit");
		}
		my $log = log_since($node, $log_off);
		my $tok = $self->{token};
		unlike($log, qr/\Q$tok\E/, 'the server log does not contain the token');
		unlike($self->status_text, qr/\Q$tok\E/, 'status() does not contain the token');
		my @leak = grep { grep { $_->[1] =~ /\Q$tok\E/ || lc($_->[0]) eq 'authorization' } @{ $_->{headers} } }
		  @{ $hostile->trap };
		is(scalar(@leak), 0, 'no request with credentials reached the redirect target');
		my $reqs = $hostile->requests($req_off);
		my @bad = grep { @{ $_->{bad_segments} } } @$reqs;
		is(scalar(@bad), 0, 'no request had an empty, "." or ".." path segment')
		  or diag(join("\n", map { "$_->{method} $_->{target}" } @bad[ 0 .. ($#bad < 9 ? $#bad : 9) ]));
		my @danger = grep { $_->{dangerous} } @$reqs;
		is(scalar(@danger), 0, 'no deletecollection, namespace delete or other unnamed delete')
		  or diag(join("\n", map { "$_->{method} $_->{target}" } @danger[ 0 .. ($#danger < 9 ? $#danger : 9) ]));
		if (defined $canary_attempts && !$o{canary_may_change})
		{
			is(col($node, $self->{canary}, 'state'), 'RUNNING', 'the canary job still runs');
			is(fake_create_attempts($fake, $self->{canary}), $canary_attempts,
				'the running canary job was not created again');
		}
		note(sprintf('%s: %.1f s, peak RssAnon %s', $mode, time() - $t0,
			join(', ', map { "$_ " . int($peak->{$_} / 1024) . ' MB' } sort keys %$peak)));
	});
	return;
}

1;
