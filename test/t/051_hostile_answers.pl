# paidb against a hostile API server (issue 8, SPEC §8): answers to every
# request (LIST, WATCH, GET, create, patch, delete) that are HTML pages,
# truncated, badly chunked, a byte per second, redirects to another port
# (which records whatever reaches it: the token must never), non-JSON 2xx
# bodies to creates and patches, 409 everywhere and 404 everywhere.  Same
# checks as 050_hostile_watch.pl (HostileApi::Harness::scenario); jobs with
# add-ons are submitted too, so secrets and priority classes go through the
# hostile server.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HTTP::Tiny;
use KubeFake;
use PaidbTest;
use HostileApi;

my ($token, $token_file) = PaidbTest::new_token('paidb-051-token-');
my $fake = PaidbTest::start_fake(token_file => $token_file);
my $hostile = HostileApi->start($fake);
my $node = PaidbTest::start_node('hostile_answers', $fake, url => $hostile->url,
	token_file => $token_file, retain_mode => 'off', resync_interval => '5s',
	conf => "paidb.k8s_timeout = '5s'\n");

my $canary = job_name('alice', 'canary051');
submit($node, job_request($canary, run_seconds => 'inf'));
ok(poll($node, "SELECT state = 'RUNNING' FROM paidb.framework WHERE name = '$canary'"),
	'the canary job runs');

# a test stopped from outside still stops its servers (END blocks run)
$SIG{TERM} = $SIG{INT} = sub { die "stopped by a signal\n" };

my $h = HostileApi::harness($node, $fake, $hostile, token => $token, canary => $canary);

# a job with a secret and a priority class, submitted during the hostile
# phase: its add-ons meet the hostile answers too
my $n = 0;
sub with_addons
{
	my $name = 'hostileaddons' . ++$n;
	submit($node, job_request($name, run_seconds => '0.2', step_seconds => '0.02'),
		add_ons => {
			configSecretDef => { apiVersion => 'v1', kind => 'Secret',
				metadata => { name => "$name-config", namespace => 'default' },
				stringData => { 'config.yaml' => 'x: 1' } },
			priorityClassDef => { apiVersion => 'scheduling.k8s.io/v1', kind => 'PriorityClass',
				metadata => { name => "$name-priority" }, value => 100 },
		});
	return $name;
}

# the trap itself works: a client that follows the redirect lands there
sub probe_trap
{
	my $res = HTTP::Tiny->new(timeout => 10, max_redirect => 1)->get($hostile->url . '/api/v1/namespaces/default/secrets/probe',
		{ headers => { 'X-Probe' => 'hostile-051' } });
	ok((grep { grep { $_->[0] eq 'X-Probe' } @{ $_->{headers} } } @{ $hostile->trap }),
		'a client following the redirect reaches the trap port (so the trap can see a leak)');
}

my %opts = (
	redirect => { at_start => \&probe_trap },
	# the watchers' error is the one to see; creates may not come at all
	slow => { error => [ 'sync' ], secs => 20 },
	# a 404 to the poller's GET is "deleted": the canary may rightly be
	# re-created
	notfound => { canary_may_change => 1 },
	non_json_2xx => { error => [ 'sync' ] },
);
my @scenarios = @ARGV ? @ARGV : qw(html truncated bad_chunk slow redirect
  non_json_2xx conflict notfound);
for my $s (@scenarios)
{
	my $addons;
	my $more = $opts{$s}{at_start};
	$h->scenario($s, %{ $opts{$s} // {} },
		error => $opts{$s}{error} // [ 'sync', 'framework watcher' ],
		at_start => sub { $addons = with_addons(); $more->() if $more; });
	ok(poll($node, "SELECT state = 'SUCCEEDED' FROM paidb.framework WHERE name = '$addons'", 't', 90),
		"$s: a job with add-ons submitted during the hostile phase succeeds too");
	is(fake_creates($fake, "$addons-config", 'secrets'), 1, "$s: its secret was created once");
	is(fake_creates($fake, "$addons-priority", 'priorityclasses'), 1, "$s: its priority class was created once");
}
done_testing();
