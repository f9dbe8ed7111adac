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

my $h = HostileApi::harness($node, $fake, $hostile, token => $token, canary => $canary);

my @scenarios = @ARGV ? @ARGV : qw(
  list_invalid_json list_wrong_types list_no_metadata list_hostile_names
  list_rv_text list_rv_30digits list_big_object list_deep_nesting
  watch_invalid_json watch_wrong_types watch_no_metadata watch_hostile_names
  watch_rv_text watch_rv_30digits watch_big_object watch_deep_nesting
  watch_garbage watch_unknown_type watch_error_event watch_huge_line
  watch_endless_line watch_410);
$h->scenario($_) for @scenarios;

is(col($node, $canary, 'state'), 'RUNNING', 'the canary job still runs');
done_testing();
