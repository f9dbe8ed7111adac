# paidb against a hostile API server (issue 8, SPEC §8): LIST and WATCH
# answers that are malformed, huge, deeply nested, garbage, endless, with
# hostile names or resourceVersions.  test/hostile-api/hostile-api sits in
# front of a kube-fake and is switched to one misbehaviour after another;
# for each (HostileApi::Harness::scenario): no crash or worker exit, worker
# memory under 256 MB and back down, the error in status() and never the
# token, no request with an empty/./.. segment and no unnamed delete, the
# running canary job is never re-created, and once the server is sane again
# a job submitted meanwhile runs to its end.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use KubeFake;
use PaidbTest;
use HostileApi;

my ($token, $token_file) = PaidbTest::new_token('paidb-050-token-');
my $fake = PaidbTest::start_fake(token_file => $token_file);
my $hostile = HostileApi->start($fake);
my $node = PaidbTest::start_node('hostile_watch', $fake, url => $hostile->url,
	token_file => $token_file, retain_mode => 'off', resync_interval => '5s',
	conf => "paidb.k8s_timeout = '5s'\n");

# a job that runs until stopped: a malformed LIST must never reset it
my $canary = job_name('alice', 'canary050');
submit($node, job_request($canary, run_seconds => 'inf'));
ok(poll($node, "SELECT state = 'RUNNING' FROM paidb.framework WHERE name = '$canary'"),
	'the canary job runs');

# a test stopped from outside still stops its servers (END blocks run)
$SIG{TERM} = $SIG{INT} = sub { die "stopped by a signal\n" };

my $h = HostileApi::harness($node, $fake, $hostile, token => $token, canary => $canary);

# The resourceVersion scenarios come last: a paidb that adopts a bad
# position may never watch again, and every scenario after it would fail.
my @scenarios = @ARGV ? @ARGV : qw(
  list_invalid_json list_wrong_types list_no_metadata list_hostile_names
  list_big_object list_deep_nesting
  watch_invalid_json watch_wrong_types watch_no_metadata watch_hostile_names
  watch_big_object watch_deep_nesting watch_garbage watch_unknown_type
  watch_error_event watch_huge_line watch_endless_line watch_410
  list_rv_text watch_rv_text list_rv_30digits watch_rv_30digits);
# the framework watcher has taken in the 50 MB framework when it deletes it
# as an orphan (retain_mode is off)
my %big = (secs => 60, until_what => 'the framework watcher took in the 50 MB framework (and deletes it)',
	until => sub {
		my ($self, $since) = @_;
		return grep { $_->{method} eq 'DELETE' && $_->{target} =~ m{/frameworks/hostilebig$} }
		  @{ $hostile->requests($since) };
	});
# a bad event is skipped, the watch goes on: the framework watcher does not
# take the stream for broken and watch again
my %skip = (hold => 3, check => sub {
	my ($self, $since) = @_;
	my @w = grep { $_->{class} eq 'watch' && $_->{resource} eq 'frameworks' && $_->{mode} ne 'sane' }
	  @{ $hostile->requests($since) };
	is(scalar(@w), 1, 'the framework watcher skipped the bad events and kept watching the same stream');
});
my %opts = (
	watch_wrong_types => { %skip },
	watch_no_metadata => { %skip },
	watch_unknown_type => { %skip },
	watch_hostile_names => { %skip },
	# 50 MB is under paidb.max_object_bytes (64MB): applied, not an error;
	# what counts is the memory it takes
	list_big_object => { error => [], %big },
	watch_big_object => { error => [], %big },
	# a line that never ends (32 MB a second): paidb must say so, and hold
	# no more than max_object_bytes of it, while it is still streaming; far
	# past the limit (256 MB) it gives the watch up and watches again
	watch_endless_line => { secs => 30,
		until_what => 'the endless watch was given up as bad data',
		until => sub {
			my ($self) = @_;
			return PostgreSQL::Test::Utils::slurp_file($self->{node}->logfile)
			  =~ /an event in the watch stream ran to \d+ bytes without ending, far past paidb\.max_object_bytes/;
		} },
	# every watch ends in 410: LIST again, but with backoff (0.8 s doubling;
	# once ~380 LISTs a second per watcher)
	watch_410 => { hold => 5, check => sub {
		my ($self, $since, $secs) = @_;
		my @lists = grep { $_->{class} eq 'list' && $_->{resource} eq 'frameworks' }
		  @{ $hostile->requests($since) };
		cmp_ok(scalar(@lists), '<=', 2 + $secs, sprintf('the framework watcher re-listed %d times in %.1f s', scalar(@lists), $secs));
	} },
);
$h->scenario($_, %{ $opts{$_} // {} }) for @scenarios;

is(col($node, $canary, 'state'), 'RUNNING', 'the canary job still runs');
done_testing();
