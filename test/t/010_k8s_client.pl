
# Tests of the Kubernetes client (src/k8s_client.c, src/k8s_watch.c) against
# test/kube-fake, through the test-only module test/modules/paidb_test (paidb
# preloaded per session for its settings).  The extension itself is not
# created: the functions are declared here.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";

use Cwd ();
use Digest::MD5 qw(md5_hex);
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use KubeFake;

my $json = JSON::PP->new->canonical->allow_nonref;

# time limits are multiplied by this (e.g. 10 when the server runs under valgrind)
my $slow = $ENV{PAIDB_TEST_SLOW} // 1;
my $tmp = Cwd::abs_path(PostgreSQL::Test::Utils::tempdir);

# Write a file atomically (new inode, as a kubelet token rotation does)
sub write_file_atomic
{
	my ($path, $text) = @_;
	open(my $fh, '>', "$path.tmp") or die "$path.tmp: $!";
	print $fh $text;
	close($fh);
	rename("$path.tmp", $path) or die "rename $path: $!";
	return;
}

# The fake reads one token file, PostgreSQL another: they can disagree.
my $fake_token_file = "$tmp/fake-token";
my $pg_token_file = "$tmp/pg-token";
my $token1 = 'token-one-' . md5_hex('one' . $$);
my $token2 = 'token-two-' . md5_hex('two' . $$);
my $wrong_token = 'wrong-token-' . md5_hex('wrong' . $$);
my @extra_tokens;
write_file_atomic($fake_token_file, "$token1\n");
write_file_atomic($pg_token_file, "$token1\n");

my $fake = KubeFake->start(
	dir => $tmp,
	token_file => $fake_token_file,
	bookmark_interval => 1,
	history_size => 1000);

my $node = PostgreSQL::Test::Cluster->new('k8s');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
paidb.k8s_api_server = '@{[ $fake->url ]}'
paidb.k8s_token_file = '$pg_token_file'
paidb.k8s_timeout = '10s'
paidb.list_page_size = 3
session_preload_libraries = 'paidb'
});
$node->start;

# the library under test (PAIDB_TEST_LIB: another build, e.g. for a mutation check)
my $lib = $ENV{PAIDB_TEST_LIB} // '$libdir/paidb_test';
my $decl = q{
CREATE FUNCTION paidb_test_k8s_request(verb text, path text, body text DEFAULT NULL,
	timeout_ms int DEFAULT 0) RETURNS jsonb
	AS '$libdir/paidb_test', 'paidb_test_k8s_request' LANGUAGE C;
CREATE FUNCTION paidb_test_k8s_path(kind text, name text DEFAULT NULL, ns text DEFAULT NULL,
	qkey text DEFAULT NULL, qvalue text DEFAULT NULL) RETURNS text
	AS '$libdir/paidb_test', 'paidb_test_k8s_path' LANGUAGE C;
CREATE FUNCTION paidb_test_k8s_list(path text, page_limit int DEFAULT 0,
	max_pages int DEFAULT 1000, continue_token text DEFAULT NULL) RETURNS jsonb
	AS '$libdir/paidb_test', 'paidb_test_k8s_list' LANGUAGE C;
CREATE FUNCTION paidb_test_k8s_watch(path text, resource_version text,
	max_events int DEFAULT 0, timeout_s int DEFAULT 0, wall_ms int DEFAULT 10000,
	bookmarks bool DEFAULT true, idle_s int DEFAULT 0, jitter bool DEFAULT false)
	RETURNS jsonb
	AS '$libdir/paidb_test', 'paidb_test_k8s_watch' LANGUAGE C;
CREATE FUNCTION paidb_test_k8s_concurrent(path text, n int, timeout_ms int DEFAULT 0)
	RETURNS jsonb
	AS '$libdir/paidb_test', 'paidb_test_k8s_concurrent' LANGUAGE C;
CREATE FUNCTION paidb_test_k8s_in_flight() RETURNS int
	AS '$libdir/paidb_test', 'paidb_test_k8s_in_flight' LANGUAGE C;
CREATE FUNCTION paidb_test_k8s_reset() RETURNS void
	AS '$libdir/paidb_test', 'paidb_test_k8s_reset' LANGUAGE C;
CREATE FUNCTION paidb_test_k8s_config() RETURNS jsonb
	AS '$libdir/paidb_test', 'paidb_test_k8s_config' LANGUAGE C;
CREATE FUNCTION paidb_test_k8s_retry_after(value text) RETURNS bigint
	AS '$libdir/paidb_test', 'paidb_test_k8s_retry_after' LANGUAGE C;
CREATE FUNCTION paidb_test_jsonb_without(json text, key text) RETURNS jsonb
	AS '$libdir/paidb_test', 'paidb_test_jsonb_without' LANGUAGE C;
CREATE FUNCTION paidb_test_jsonb_print(value jsonb, skip text[]) RETURNS text
	AS '$libdir/paidb_test', 'paidb_test_jsonb_print' LANGUAGE C;
CREATE FUNCTION paidb_test_jsonb_replaced(obj jsonb, keys text[], vals jsonb[]) RETURNS jsonb
	AS '$libdir/paidb_test', 'paidb_test_jsonb_replaced' LANGUAGE C;
CREATE FUNCTION paidb_test_jsonb_selected(obj jsonb, keys text[], vals jsonb[]) RETURNS jsonb
	AS '$libdir/paidb_test', 'paidb_test_jsonb_selected' LANGUAGE C;
};
$decl =~ s/'\$libdir\/paidb_test'/'$lib'/g;
$node->safe_psql('postgres', $decl);

# The hooks live only in the test module: the production library exports
# neither them nor the accessors only they use (PAIDB_TEST_HOOKS).
{
	my $pkglibdir = $node->config_data('--pkglibdir');
	my %prod = map { (split ' ')[2] => 1 }
	  grep { / T / } `nm -D --defined-only $pkglibdir/paidb.so`;
	my %test = map { (split ' ')[2] => 1 }
	  grep { / T / } `nm -D --defined-only $pkglibdir/paidb_test.so`;
	ok(scalar(keys %prod) > 20 && $prod{k8s_request_submit},
		'nm lists the production library\'s exports');
	for my $f (qw(paidb_test_k8s_request paidb_test_k8s_watch k8s_client_destroy
		k8s_client_in_flight k8s_perform_request k8s_retry_after_ms
		k8s_watch_event_type_name k8s_watch_event_free
		k8s_list_next_item_wait k8s_list_remaining_item_count k8s_list_item_count
		k8s_list_item_free))
	{
		ok(!$prod{$f}, "paidb.so does not export $f");
		ok($test{$f} || $f eq 'k8s_watch_event_type_name', "paidb_test.so has $f");
	}
}

# SQL literal of a Perl string (or NULL)
sub lit
{
	my ($s) = @_;
	return 'NULL' unless defined $s;
	$s =~ s/'/''/g;
	return "'$s'";
}

# Run one SQL expression returning jsonb; decode it
sub jq
{
	my ($expr) = @_;
	my $out = $node->safe_psql('postgres', "SELECT $expr");
	return $json->decode($out);
}

# One blocking request through the client
sub req
{
	my ($verb, $path, $body, $timeout_ms) = @_;
	return jq("paidb_test_k8s_request("
		  . join(', ', lit($verb), lit($path), lit($body), $timeout_ms // 0)
		  . ")");
}

# Change settings and reload; new sessions see them
sub set_conf
{
	my (%set) = @_;
	my $sql = "LOAD '$lib';\n";
	for my $k (sort keys %set)
	{
		$sql .= "ALTER SYSTEM SET $k = " . lit($set{$k}) . ";\n";
	}
	$node->safe_psql('postgres', $sql . "SELECT pg_reload_conf();");
	return;
}

# Poll until $cond->() is true, or give up after $secs
sub wait_until
{
	my ($cond, $secs) = @_;
	my $deadline = time() + ($secs // 20);
	while (time() < $deadline)
	{
		return 1 if $cond->();
		usleep(50_000);
	}
	return 0;
}

my $ns = 'default';
my $fw_path = "/apis/frameworkcontroller.microsoft.com/v1/namespaces/$ns/frameworks";
my $secret_path = "/api/v1/namespaces/$ns/secrets";

# Minimal framework object
sub framework
{
	my ($name, %extra) = @_;
	return $json->encode(
		{
			apiVersion => 'frameworkcontroller.microsoft.com/v1',
			kind => 'Framework',
			metadata => { name => $name, %extra },
			spec => { executionType => 'Start', taskRoles => [] },
		});
}

# ---------------------------------------------------------------------
note 'paths and configuration';

is($node->safe_psql('postgres', "SELECT paidb_test_k8s_path('frameworks')"),
	$fw_path, 'framework collection path');
is( $node->safe_psql('postgres', "SELECT paidb_test_k8s_path('frameworks', 'abc', 'other')"),
	'/apis/frameworkcontroller.microsoft.com/v1/namespaces/other/frameworks/abc',
	'framework path in another namespace');
is($node->safe_psql('postgres', "SELECT paidb_test_k8s_path('secrets', 's1')"),
	"$secret_path/s1", 'secret path');
is( $node->safe_psql('postgres', "SELECT paidb_test_k8s_path('priorityclasses', 'p1')"),
	'/apis/scheduling.k8s.io/v1/priorityclasses/p1',
	'priorityclass path (cluster scoped)');
is($node->safe_psql('postgres', "SELECT paidb_test_k8s_path('events')"),
	"/api/v1/namespaces/$ns/events", 'event collection path');
is( $node->safe_psql(
		'postgres',
		"SELECT paidb_test_k8s_path('frameworks', NULL, NULL, 'continue', 'a b/c+=&?%é')"),
	"$fw_path?continue=a%20b%2Fc%2B%3D%26%3F%25%C3%A9",
	'query values are percent-encoded');

# SPEC §8: a name its kind does not allow never becomes a path, and no path
# with an empty, "." or ".." segment is sent (libcurl would remove dot
# segments, turning a DELETE of one secret into one of every secret)
for my $bad ([ 'secrets', '.' ], [ 'secrets', '..' ], [ 'priorityclasses', '..' ], [ 'frameworks', '.' ],
	[ 'frameworks', 'a/b' ], [ 'secrets', '' ], [ 'events', 'A' ], [ 'secrets', 's1', '..' ], [ 'frameworks', undef, '' ])
{
	my ($rc, $out, $err) = $node->psql('postgres',
		'SELECT paidb_test_k8s_path(' . join(', ', map { lit($_) } @$bad) . ')');
	like($err // '', qr/invalid kubernetes name/, "no path for @{[ join ' ', map { $_ // 'NULL' } @$bad ]}");
}
{
	my $before = $fake->counters->{total};
	for my $p ('/api/v1/namespaces/kube-system/secrets/', '/apis/scheduling.k8s.io/v1/priorityclasses/..',
		'/api/v1/namespaces/default/secrets/./x', '/api/v1//namespaces', '/api/v1/namespaces/default/frameworks/.?x=1')
	{
		my ($rc, $out, $err) = $node->psql('postgres', "SELECT paidb_test_k8s_request('delete', " . lit($p) . ")");
		like($err // '', qr/refusing to send a kubernetes API request whose path has an empty/, "refused: DELETE $p");
	}
	is($fake->counters->{total}, $before, 'none of them reached the API server');
}

my $cfg = jq('paidb_test_k8s_config()');
is($cfg->{base_url}, $fake->url, 'base URL from paidb.k8s_api_server');
is($cfg->{namespace}, 'default', 'namespace from paidb.k8s_namespace');

# ---------------------------------------------------------------------
note 'verbs';

my $r = req('create', $secret_path,
	$json->encode({ metadata => { name => 'sec1' }, data => { k => 'dg==' } }));
is($r->{kind}, 'ok', 'create secret: ok');
is($r->{http_status}, 201, 'create secret: 201');
is($json->decode($r->{body})->{metadata}{name}, 'sec1', 'create secret: body is the object');

$r = req('create', $fw_path, framework('fw1'));
is($r->{http_status}, 201, 'create framework: 201');
$r = req('create', $fw_path, framework('fw1'));
is($r->{kind}, 'http_error', 'create again: http error');
is($r->{http_status}, 409, 'create again: 409');
is($r->{reason}, 'AlreadyExists', 'create again: Status reason parsed');
is($r->{status_code}, 409, 'create again: Status code parsed');
like($r->{message}, qr/fw1/, 'create again: Status message parsed');
ok(!$r->{retryable}, '409 is not retryable');

$r = req('get', "$fw_path/fw1");
is($r->{kind}, 'ok', 'get: ok');
is($json->decode($r->{body})->{metadata}{name}, 'fw1', 'get: the object');
$r = req('get', "$fw_path/nosuch");
is($r->{http_status}, 404, 'get missing: 404');
is($r->{reason}, 'NotFound', 'get missing: reason NotFound');

$r = req('merge-patch', "$fw_path/fw1",
	'{"metadata":{"labels":{"team":"alpha"},"annotations":{"requestGeneration":"2"}}}');
is($r->{http_status}, 200, 'merge-patch: 200');
$r = req('get', "$fw_path/fw1");
my $obj = $json->decode($r->{body});
is($obj->{metadata}{labels}{team}, 'alpha', 'merge-patch: label applied');
is($obj->{metadata}{annotations}{requestGeneration}, '2', 'merge-patch: annotation applied');
$r = req('merge-patch', "$fw_path/fw1", '{"metadata":{"labels":{"team":null}}}');
ok(!exists $json->decode($r->{body})->{metadata}{labels}{team},
	'merge-patch: null removes a member (sent as merge patch)');

$r = req('delete', "$fw_path/fw1", 'Sideways');
is($r->{http_status}, 422, 'delete with a bad propagationPolicy: 422 (the body was sent)');
is($r->{reason}, 'Invalid', 'delete with a bad propagationPolicy: reason Invalid');
$r = req('delete', "$fw_path/fw1", 'Foreground');
is($r->{http_status}, 200, 'delete Foreground: 200');
$obj = $json->decode($r->{body});
ok((grep { $_ eq 'foregroundDeletion' } @{ $obj->{metadata}{finalizers} || [] }),
	'delete Foreground: foregroundDeletion finalizer set');
ok(wait_until(sub { req('get', "$fw_path/fw1")->{http_status} == 404 }),
	'foreground-deleted framework goes away');
$r = req('delete', "$secret_path/sec1", undef);
is($r->{http_status}, 200, 'delete without options: 200');

# ---------------------------------------------------------------------
note 'paged list';

for my $i (1 .. 7)
{
	is(req('create', $fw_path, framework("pl$i"))->{http_status}, 201, "create pl$i");
}
my $list = jq("paidb_test_k8s_list(" . lit($fw_path) . ", 3)");
is($list->{result}{kind}, 'ok', 'list: ok');
is($list->{pages}, 3, 'list: 7 items in pages of 3 take 3 pages');
is_deeply($list->{page_sizes}, [ 3, 3, 1 ], 'list: page sizes bounded by the limit');
is_deeply([ sort @{ $list->{names} } ], [ map { "pl$_" } 1 .. 7 ], 'list: every item once');
like($list->{resource_version}, qr/^\d+$/, 'list: resourceVersion of the list');
is($list->{continue}, undef, 'list: no continue after the last page');
is($list->{in_flight}, 0, 'list: nothing left in flight');

$list = jq("paidb_test_k8s_list(" . lit($fw_path) . ")");
is($list->{pages}, 3, 'list: limit from paidb.list_page_size');

$list = jq("paidb_test_k8s_list(" . lit($fw_path) . ", 2, 1)");
is(scalar @{ $list->{names} }, 2, 'first page of 2');
my $cont = $list->{continue};
ok(defined $cont && $cont ne '', 'first page has a continue token');
is($list->{remaining}, 5, 'remainingItemCount parsed');
my $rest = jq("paidb_test_k8s_list(" . lit($fw_path) . ", 2, 100, " . lit($cont) . ")");
is(scalar @{ $rest->{names} }, 5, 'continue token gives the rest');

req('create', $fw_path, framework('pl8'));
$fake->compact;
$rest = jq("paidb_test_k8s_list(" . lit($fw_path) . ", 2, 100, " . lit($cont) . ")");
is($rest->{result}{http_status}, 410, 'expired continue: 410');
is($rest->{result}{reason}, 'Expired', 'expired continue: reason Expired');
ok($rest->{result}{gone}, 'expired continue: recognised as gone');

# ---------------------------------------------------------------------
note 'watch';

my $rv0 = $fake->resource_version;
for my $n (qw(w1 w2 w3))
{
	req('create', $fw_path, framework($n));
}
my $w = jq("paidb_test_k8s_watch(" . lit($fw_path) . ", " . lit($rv0) . ", 3, 30, 10000, false)");
is_deeply([ map { "$_->{type} $_->{name}" } @{ $w->{events} } ],
	[ 'ADDED w1', 'ADDED w2', 'ADDED w3' ], 'watch from an RV: the later events in order');
is($w->{events}[0]{object}{metadata}{name}, 'w1', 'watch: the object is JSON');
is($w->{events}[0]{object}{kind}, 'Framework', 'watch: the whole object');
my $rv_w1 = $w->{events}[0]{rv};
ok($rv_w1 > $rv0, 'watch: event RV after the start RV');
is($w->{in_flight}, 0, 'watch stopped: nothing in flight');

$w = jq("paidb_test_k8s_watch(" . lit($fw_path) . ", " . lit($rv_w1) . ", 0, 2, 15000, false)");
is_deeply([ map { "$_->{type} $_->{name}" } @{ $w->{events} } ],
	[ 'ADDED w2', 'ADDED w3' ], 'watch resumed from an event RV: exactly the later events');
is($w->{end}, 'closed', 'watch: the server closing at timeoutSeconds is a clean end');
is($w->{result}{kind}, 'ok', 'watch: result ok after a clean end');
is($w->{timeout_s}, 2, 'watch: timeoutSeconds without jitter');
is($w->{last_rv}, $w->{events}[1]{rv}, 'watch: last RV is the last event taken');

$w = jq("paidb_test_k8s_watch(" . lit($fw_path) . ", " . lit($fake->resource_version) . ", 0, 3, 15000, true)");
my @bm = grep { $_->{type} eq 'BOOKMARK' } @{ $w->{events} };
ok(scalar(@bm) >= 1, 'bookmarks are received');
like($bm[0]{rv}, qr/^\d+$/, 'bookmark carries a resourceVersion') if @bm;
is($w->{end}, 'closed', 'watch with bookmarks ends cleanly');

$w = jq("paidb_test_k8s_watch(" . lit("/api/v1/namespaces/$ns/events") . ", "
	  . lit($fake->resource_version) . ", 0, 60, 20000, false, 1)");
is($w->{end}, 'cut', 'idle guard: a silent watch is cut');
is($w->{result}{kind}, 'timeout', 'idle guard: reported as a timeout');
is($w->{count}, 0, 'idle guard: no event');

$w = jq("paidb_test_k8s_watch(" . lit($fw_path) . ", '', 1, 10, 10000, true, 0, true)");
ok($w->{timeout_s} >= 10 && $w->{timeout_s} < 20, "jittered timeoutSeconds in [10, 20): $w->{timeout_s}");
is($w->{events}[0]{type}, 'ADDED', 'watch without RV starts with the current objects');

# a big object arrives in many pieces
my $big = 'x' x 200000;
req('create', $fw_path, framework('big1', annotations => { blob => $big }));
my $rv_before_big = $fake->resource_version - 1;
$w = jq("paidb_test_k8s_watch(" . lit($fw_path) . ", " . lit($rv_before_big) . ", 1, 30, 10000, false)");
is($w->{events}[0]{name}, 'big1', 'big event parsed across chunks');
is(md5_hex($w->{events}[0]{object}{metadata}{annotations}{blob}), md5_hex($big), 'big event intact');
$list = jq("paidb_test_k8s_list(" . lit($fw_path) . ", 100)");
ok((grep { $_ eq 'big1' } @{ $list->{names} }), 'big item parsed in a list page');

# a 2xx body that is not what was asked for stops the transfer at once
$w = jq("paidb_test_k8s_watch('/healthz', NULL, 0, 30, 10000, false)");
is($w->{end}, 'bad_data', 'a stream that is not watch events: bad data');
is($w->{result}{kind}, 'transport', 'bad data: transport error');
like($w->{result}{message}, qr/invalid JSON in watch stream/, 'bad data: message');
$list = jq("paidb_test_k8s_list('/healthz', 3)");
is($list->{result}{kind}, 'transport', 'a list body that is not a list: transport error');
like($list->{result}{message}, qr/malformed list response/, 'malformed list: message');

# 410: too old RV (an ERROR event), and HTTP 410
$w = jq("paidb_test_k8s_watch(" . lit($fw_path) . ", '1', 0, 30, 10000, false)");
is($w->{events}[0]{type}, 'ERROR', 'too old RV: ERROR event');
is($w->{events}[0]{code}, 410, 'too old RV: code 410');
is($w->{events}[0]{reason}, 'Expired', 'too old RV: reason Expired');
ok($w->{expired}, 'too old RV: watch reports expired');
is($w->{end}, 'closed', 'too old RV: stream closed after the ERROR event');

$fake->fault(status => 410, count => 1, verb => 'watch');
$w = jq("paidb_test_k8s_watch(" . lit($fw_path) . ", " . lit($fake->resource_version) . ", 0, 30, 10000, false)");
is($w->{end}, 'failed', 'HTTP 410 on a watch: failed to start');
is($w->{result}{http_status}, 410, 'HTTP 410 on a watch: status');
ok($w->{expired}, 'HTTP 410 on a watch: expired');

# a stream cut in the middle of an event (on secrets: stopped framework
# watches may linger in the fake until it next writes to them)
{
	my $bg = $node->background_psql('postgres', on_error_stop => 0);
	my $start_rv = $fake->resource_version;
	$bg->query_until(qr/started/,
		    "\\echo started\nSELECT paidb_test_k8s_watch("
		  . lit($secret_path) . ", "
		  . lit($start_rv)
		  . ", 0, 60, 20000, false);\n\\echo watchdone\n");
	ok(wait_until(sub { grep { $_->{resource} eq 'secrets' } @{ $fake->watches } }),
		'cut: the watch is open');
	req('create', $secret_path, $json->encode({ metadata => { name => 'cut1' } }));
	my $rv_cut1 = $fake->resource_version;
	ok( wait_until(sub { grep { $_->{resourceVersion} >= $rv_cut1 } @{ $fake->watches } }),
		'cut: the first event was sent');
	is($fake->cut_watches('mid-event', 'secrets'), 1, 'cut: one watch marked');
	req('create', $secret_path, $json->encode({ metadata => { name => 'cut2' } }));
	my $out = $bg->query_until(qr/watchdone/, '');
	my ($line) = split /\n/, $out;
	my $cw = $json->decode($line);
	is_deeply([ map { $_->{name} } @{ $cw->{events} } ], ['cut1'],
		'cut mid-event: only whole events');
	is($cw->{end}, 'cut', 'cut mid-event: reported as a cut');
	isnt($cw->{result}{kind}, 'ok', "cut mid-event: result $cw->{result}{kind}");
	is($cw->{in_flight}, 0, 'cut mid-event: nothing left in flight');
	$bg->query_safe('SELECT paidb_test_k8s_reset()');
	$bg->quit;
}

# ---------------------------------------------------------------------
note 'errors';

$fake->fault(status => 429, count => 1, verb => 'get', retryAfter => 7);
$r = req('get', "$fw_path/pl1");
is($r->{http_status}, 429, '429 returned');
is($r->{retry_after_ms}, 7000, 'Retry-After parsed');
ok($r->{retryable}, '429 is retryable');
is(req('get', "$fw_path/pl1")->{kind}, 'ok', 'the next request works');

# SPEC §8: Retry-After is honoured up to paidb.max_retry_after, whether the
# server says it in the header (with the Status' details, as the fake does)
# or only in the Status' details.retryAfterSeconds
set_conf('paidb.max_retry_after' => '3s');
$fake->fault(status => 429, count => 1, verb => 'get', retryAfter => 86400);
$r = req('get', "$fw_path/pl1");
is($r->{http_status}, 429, 'a 429 asking for a day');
is($r->{retry_after_ms}, 3000, 'Retry-After: 86400 is cut to paidb.max_retry_after (3 s)');
$fake->fault(status => 429, count => 1, verb => 'get', action => 'body', contentType => 'application/json',
	body => $json->encode({ kind => 'Status', apiVersion => 'v1', status => 'Failure',
		reason => 'TooManyRequests', code => 429, message => 'slow down',
		details => { retryAfterSeconds => 86400 } }));
$r = req('get', "$fw_path/pl1");
is("$r->{http_status} $r->{reason}", '429 TooManyRequests', 'a 429 with only a Status asking for a day');
is($r->{retry_after_ms}, 3000, 'details.retryAfterSeconds: 86400 is cut to paidb.max_retry_after too');
$fake->fault(status => 429, count => 1, verb => 'get', retryAfter => 2);
is(req('get', "$fw_path/pl1")->{retry_after_ms}, 2000, 'a Retry-After under the cap is kept');
set_conf('paidb.max_retry_after' => '5min');

# the HTTP-date form of Retry-After (the fake only sends seconds)
my $ra = $node->safe_psql(
	'postgres', q{
SELECT paidb_test_k8s_retry_after('12'),
       paidb_test_k8s_retry_after(to_char((now() + interval '60 s') AT TIME ZONE 'UTC',
                                          'Dy, DD Mon YYYY HH24:MI:SS "GMT"')) BETWEEN 55000 AND 61000,
       paidb_test_k8s_retry_after('Wed, 21 Oct 2015 07:28:00 GMT'),
       paidb_test_k8s_retry_after('soon'),
       paidb_test_k8s_retry_after('')});
is($ra, '12000|t|0|-1|-1', 'Retry-After: seconds, future date, past date, garbage, empty');

$fake->fault(
	status => 500,
	count => 1,
	verb => 'patch',
	reason => 'InternalError',
	message => 'etcdserver: mvcc: database space exceeded ResourceExhausted');
$r = req('merge-patch', "$fw_path/pl1", '{"metadata":{"labels":{"a":"b"}}}');
is($r->{http_status}, 500, '500 returned');
is($r->{reason}, 'InternalError', '500: Status reason parsed');
like($r->{message}, qr/ResourceExhausted/, '500: Status message parsed');
is($r->{retry_after_ms}, -1, '500 without Retry-After');

$fake->fault(status => 503, count => 1, verb => 'get', action => 'drop');
$r = req('get', "$fw_path/pl1");
is($r->{kind}, 'transport', 'connection closed without a response: transport error');
is($r->{http_status}, 0, 'transport error: no HTTP status');

$fake->latency(seconds => 3, count => 1, name => 'pl2');
$r = req('get', "$fw_path/pl2", undef, 500);
is($r->{kind}, 'timeout', 'slow response: timeout');
is($r->{curl_code}, 28, 'timeout: CURLE_OPERATION_TIMEDOUT');

# many requests at once
$fake->latency(seconds => 1, count => 8, name => 'pl3');
my $c = jq("paidb_test_k8s_concurrent(" . lit("$fw_path/pl3") . ", 8)");
is($c->{ok}, 8, 'concurrent: 8 ok');
is($c->{max_in_flight}, 8, 'concurrent: 8 in flight at once');
ok($c->{elapsed_ms} < 4000 * $slow, "concurrent: overlapped ($c->{elapsed_ms} ms for 8 x 1 s)");
is($c->{in_flight}, 0, 'concurrent: nothing left in flight');

# ---------------------------------------------------------------------
note 'cancellation while a request is in flight';

{
	$fake->latency(seconds => 15, count => 1, name => 'pl4');
	my ($out, $err) = ('', '');
	my $t0 = time();
	$node->psql(
		'postgres',
		"SET statement_timeout = '1s';\n"
		  . "SELECT paidb_test_k8s_request('get', "
		  . lit("$fw_path/pl4") . ");\n"
		  . "RESET statement_timeout;\n"
		  . "SELECT paidb_test_k8s_in_flight();\n",
		stdout => \$out,
		stderr => \$err,
		on_error_stop => 0);
	my $elapsed = time() - $t0;
	like($err, qr/canceling statement due to statement timeout/, 'statement_timeout ends a slow request');
	ok($elapsed < 8 * $slow, sprintf('statement_timeout acted promptly (%.1f s)', $elapsed));
	is($out, '0', 'after the cancel nothing is left in flight');
	$fake->clear_faults;

	$fake->latency(seconds => 15, count => 1, name => 'pl5');
	my $bg = $node->background_psql('postgres', on_error_stop => 0);
	$bg->query_until(qr/started/,
		"\\echo started\nSELECT paidb_test_k8s_request('get', " . lit("$fw_path/pl5") . ");\n\\echo reqdone\n");
	my $pid;
	ok( wait_until(
			sub {
				$pid = $node->safe_psql('postgres',
					"SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%pl5%' AND pid <> pg_backend_pid()"
				);
				return $pid ne '';
			}),
		'the waiting backend shows wait_event_type Extension');
	$t0 = time();
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	$bg->query_until(qr/reqdone/, '');
	$elapsed = time() - $t0;
	like($bg->{stderr}, qr/canceling statement due to user request/, 'pg_cancel_backend ends a slow request');
	ok($elapsed < 5 * $slow, sprintf('pg_cancel_backend acted promptly (%.1f s)', $elapsed));
	is($bg->query('SELECT paidb_test_k8s_in_flight()'), '0', 'the cancelled session has nothing in flight');
	is($bg->query("SELECT (paidb_test_k8s_request('get', " . lit("$fw_path/pl1") . ")->>'kind')"),
		'ok', 'the cancelled session still works');

	# SIGTERM (pg_terminate_backend) ends it as well
	$fake->latency(seconds => 15, count => 1, name => 'pl6');
	$bg->query_until(qr/started2/,
		"\\echo started2\nSELECT paidb_test_k8s_request('get', " . lit("$fw_path/pl6") . ");\n");
	ok( wait_until(
			sub {
				$pid = $node->safe_psql('postgres',
					"SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%pl6%' AND pid <> pg_backend_pid()"
				);
				return $pid ne '';
			}),
		'second slow request waiting');
	$t0 = time();
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
	ok( wait_until(
			sub {
				$node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid") eq '0';
			},
			5 * $slow),
		'pg_terminate_backend ends a backend waiting on a request');
	$elapsed = time() - $t0;
	ok($elapsed < 5 * $slow, sprintf('terminated promptly (%.1f s)', $elapsed));
	eval { $bg->quit };
	$fake->clear_faults;
}

# ---------------------------------------------------------------------
note 'token file';

{
	my $bg = $node->background_psql('postgres', on_error_stop => 0);
	my $get = "SELECT (paidb_test_k8s_request('get', " . lit("$fw_path/pl1") . ")->>'http_status')";
	is($bg->query($get), '200', 'token: first request with token one');
	write_file_atomic($fake_token_file, "$token2\n");
	write_file_atomic($pg_token_file, "$token2\n");
	is($bg->query($get), '200', 'token: the same client picks up a rotated token file');
	# rewrite in place, same size (mtime/ctime change)
	my $token3 = 'token-thr-' . md5_hex('three' . $$);
	write_file_atomic($fake_token_file, "$token3\n");
	open(my $fh, '+<', $pg_token_file) or die;
	print $fh "$token3\n";
	close($fh);
	is($bg->query($get), '200', 'token: a token file rewritten in place is picked up');
	write_file_atomic($pg_token_file, "$wrong_token\n");
	my $res = $json->decode($bg->query("SELECT paidb_test_k8s_request('get', " . lit("$fw_path/pl1") . ")"));
	is($res->{http_status}, 401, 'wrong token: 401');
	is($res->{reason}, 'Unauthorized', 'wrong token: reason Unauthorized');
	write_file_atomic($pg_token_file, "$token3\n");
	is($bg->query($get), '200', 'token: fixed again');
	$bg->query_safe('SELECT paidb_test_k8s_reset()');
	$bg->quit;
	push @extra_tokens, $token3;
}

# ---------------------------------------------------------------------
note 'TLS';

{
	my $ossl = sub {
		my @cmd = ('openssl', @_);
		my ($stdout, $stderr);
		my $ok = IPC::Run::run(\@cmd, '>', \$stdout, '2>', \$stderr);
		die "openssl @_ failed: $stderr" unless $ok;
	};
	my $ec = [ '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes' ];
	$ossl->('req', '-x509', @$ec, '-keyout', "$tmp/ca.key", '-out', "$tmp/ca.crt",
		'-days', '2', '-subj', '/CN=paidb test CA');
	$ossl->('req', '-x509', @$ec, '-keyout', "$tmp/other-ca.key", '-out', "$tmp/other-ca.crt",
		'-days', '2', '-subj', '/CN=paidb other CA');
	$ossl->('req', @$ec, '-keyout', "$tmp/server.key", '-out', "$tmp/server.csr",
		'-subj', '/CN=127.0.0.1');
	open(my $ext, '>', "$tmp/server.ext") or die;
	print $ext "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
	  . "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n";
	close($ext);
	$ossl->('x509', '-req', '-in', "$tmp/server.csr", '-CA', "$tmp/ca.crt", '-CAkey', "$tmp/ca.key",
		'-CAcreateserial', '-out', "$tmp/server.crt", '-days', '2', '-extfile', "$tmp/server.ext");

	my $tls = KubeFake->start(
		dir => $tmp,
		token_file => $fake_token_file,
		tls_cert => "$tmp/server.crt",
		tls_key => "$tmp/server.key");
	like($tls->url, qr{^https://}, 'TLS fake started');

	set_conf('paidb.k8s_api_server' => $tls->url, 'paidb.k8s_ca_file' => "$tmp/ca.crt");
	$r = req('get', "/api/v1/namespaces/$ns/secrets");
	is($r->{kind}, 'ok', 'https with the right CA: ok');
	is($r->{http_status}, 200, 'https with the right CA: 200');
	$r = req('create', $fw_path, framework('tls1'));
	is($r->{http_status}, 201, 'https: create works');

	set_conf('paidb.k8s_ca_file' => "$tmp/other-ca.crt");
	$r = req('get', "/api/v1/namespaces/$ns/secrets");
	is($r->{kind}, 'transport', 'https with an unknown CA: transport error');
	like($r->{message}, qr/certificate/i, "unknown CA: TLS message ($r->{message})");
	is($r->{http_status}, 0, 'unknown CA: no HTTP exchange');

	set_conf('paidb.k8s_ca_file' => '');
	$r = req('get', "/api/v1/namespaces/$ns/secrets");
	is($r->{kind}, 'transport', 'https with the system CAs only: refused as well');

	$tls->stop;
	set_conf('paidb.k8s_api_server' => $tls->url, 'paidb.k8s_ca_file' => "$tmp/ca.crt");
	$r = req('get', "/api/v1/namespaces/$ns/secrets", undef, 3000);
	is($r->{kind}, 'transport', 'refused connection: transport error');

	set_conf('paidb.k8s_api_server' => '');
	$cfg = jq('paidb_test_k8s_config()');
	is($cfg->{base_url}, undef, 'no URL and not in a cluster: no base URL');
	$r = req('get', "/api/v1/namespaces/$ns/secrets");
	is($r->{kind}, 'transport', 'unconfigured client: requests fail as transport errors');
	like($r->{message}, qr/KUBERNETES_SERVICE_HOST/, 'unconfigured client: the message says why');

	set_conf('paidb.k8s_api_server' => $fake->url);
	is(req('get', "$fw_path/pl1")->{kind}, 'ok', 'back on the plain fake');
}

# ---------------------------------------------------------------------
note 'the watcher parses a watched object without its spec';
# It cuts the spec's value out of the text before parsing (src/jsonb_util.c,
# following only strings and brackets): for any object the result must be
# what PostgreSQL makes of the whole text less that member.
{
	my @tricky = ('"', '\\', '}', '{', ']', '[', ',', ':', 'spec', '"spec":', "\x{e9}", "\t", '\\"}');
	my $seed = 19;
	my $rand = sub { $seed = ($seed * 1103515245 + 12345) % 2**31; return $seed % $_[0]; };
	my $value;
	$value = sub {
		my ($depth) = @_;
		my $k = $rand->($depth > 3 ? 4 : 7);
		return $rand->(1000) - 500 if $k == 0;
		return join('', map { $tricky[$rand->(scalar @tricky)] } 1 .. $rand->(6)) if $k == 1;
		return JSON::PP::true() if $k == 2;
		return undef if $k == 3;
		return [ map { $value->($depth + 1) } 1 .. $rand->(4) ] if $k == 4;
		return { map { ($rand->(3) ? "k" . $rand->(9) : 'spec') => $value->($depth + 1) } 1 .. $rand->(5) };
	};
	my (@cases, $n_with);
	for my $i (1 .. 400)
	{
		# members in a random order; spec (any value) in most, or written "sp\u0065c"
		my @members = map { [ "m$_", $value->(1) ] } 1 .. $rand->(5);
		my $with = $rand->(5);
		splice(@members, $rand->(@members + 1), 0, [ 'spec', $value->(1) ]) if $with;
		$n_with++ if $with;
		my $sep = (', ', ',', " ,\n ")[ $rand->(3) ];
		my $text = '{' . join($sep, map { JSON::PP->new->ascii->allow_nonref->encode($_->[0]) . ($rand->(2) ? ' : ' : ':')
			  . JSON::PP->new->ascii->allow_nonref->encode($_->[1]) } @members) . ($rand->(2) ? ' }' : '}');
		$text =~ s/"spec"/"sp\\u0065c"/ if $with && $rand->(8) == 0;
		push @cases, $text;
	}
	ok($n_with > 200 && $n_with < 400, "most of the 400 objects have a spec ($n_with)");
	my $tbl = join(",\n", map { "('" . s/'/''/gr . "')" } @cases);
	$node->safe_psql('postgres', "CREATE TABLE parse_cases (t text); INSERT INTO parse_cases VALUES $tbl");
	is($node->safe_psql('postgres', q{SELECT count(*) FROM parse_cases
		WHERE paidb_test_jsonb_without(t, 'spec') IS DISTINCT FROM t::jsonb - 'spec'}),
		'0', 'every object parses to the whole text less its spec');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM parse_cases
		WHERE paidb_test_jsonb_without(t, 'm1') IS DISTINCT FROM t::jsonb - 'm1'}),
		'0', 'and less any other member asked for');
	# and snapshots are printed as JsonbToCString prints them (jb_print):
	# the same objects, with numbers and control characters in them, and
	# a member left out at any depth
	my @numbers = ('0', '-0', '1.50', '1e-7', '2E+20', '-3.0e2', '123456789012345678901234567890.1234567890', '7');
	my @more = map {
		my $t = $_;
		$t =~ s/"m1"/"m1\\b\\f\\n\\r\\t\\u0001\\u001f\\u007f\\u00e9"/ if $rand->(3) == 0;
		$t =~ s/(?<=: )(-?\d+)(?=[,}\]])/$numbers[$rand->(scalar @numbers)]/e for 1 .. 3;
		$t } @cases;
	push @more, '"a string"', '12.5', 'null', 'true', '[]', '{}', '[1, [2, {}], {"a": [null]}]';
	$node->safe_psql('postgres', "CREATE TABLE print_cases (j jsonb); INSERT INTO print_cases VALUES "
		  . join(",\n", map { "('" . s/'/''/gr . "')" } @more));
	is($node->safe_psql('postgres', q{SELECT count(*), count(*) FILTER (WHERE paidb_test_jsonb_print(j, '{}') = j::text)
		FROM print_cases}), scalar(@more) . '|' . scalar(@more), 'jb_print writes what jsonb_out writes');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM print_cases, (VALUES ('{spec}'::text[]), ('{m1}'), ('{m2,k1}'),
		('{m1,k3,spec}'), ('{nothing,k1}')) p(path)
		WHERE jsonb_typeof(j) = 'object' AND jsonb_typeof(j #> path[1:1]) IS DISTINCT FROM 'array'
		  AND jsonb_typeof(j #> path[1:2]) IS DISTINCT FROM 'array'
		  AND paidb_test_jsonb_print(j, path) IS DISTINCT FROM (j #- path)::text}),
		'0', 'and leaves out the member asked for, at any depth');

	# composing snapshots copies members' bytes (jb_object_replaced): the
	# hook refuses any result whose bytes are not those jsonb's own encoder
	# makes; here the result must also be the object with those members
	# removed and set to the last value given that is not NULL, for members
	# taken from other documents
	my $ncomposed = $node->safe_psql('postgres', q{SELECT 4 * count(*) FROM print_cases WHERE jsonb_typeof(j) = 'object'});
	is($node->safe_psql('postgres', q{
		WITH o AS (SELECT row_number() OVER () AS i, j FROM print_cases WHERE jsonb_typeof(j) = 'object'),
		v AS (SELECT row_number() OVER () AS i, j FROM print_cases),
		c AS (SELECT o.j, k.keys,
		             ARRAY[(SELECT j FROM v WHERE v.i = 1 + (o.i * 7) % 400),
		                   CASE WHEN o.i % 3 = 0 THEN NULL ELSE (SELECT j FROM v WHERE v.i = 1 + (o.i * 13) % 400) END,
		                   (SELECT j FROM v WHERE v.i = 1 + (o.i * 29) % 400)] AS vals
		        FROM o, (VALUES ('{spec,m1,status}'::text[]), ('{m2,zz,a}'), ('{metadata,spec,apiVersion}'), ('{m1,m1,m3}')) k(keys))
		SELECT count(*), count(*) FILTER (WHERE r = (SELECT (j - keys) || coalesce(jsonb_object_agg(key, val) FILTER (WHERE val IS NOT NULL), '{}')
		                                              FROM (SELECT key, (array_agg(val ORDER BY n DESC) FILTER (WHERE val IS NOT NULL))[1] AS val
		                                                      FROM unnest(keys, vals) WITH ORDINALITY u(key, val, n) GROUP BY key) last))
		  FROM (SELECT *, paidb_test_jsonb_replaced(j, keys, vals) AS r FROM c) x}),
		"$ncomposed|$ncomposed", 'composed objects are what jsonb itself would encode');
	# a request part keeps only some members (jb_object_selected): the named
	# members, each the value given or else the object's own, nothing else
	is($node->safe_psql('postgres', q{
		WITH o AS (SELECT row_number() OVER () AS i, j FROM print_cases WHERE jsonb_typeof(j) = 'object'),
		v AS (SELECT row_number() OVER () AS i, j FROM print_cases),
		c AS (SELECT o.j, k.keys,
		             ARRAY[CASE WHEN o.i % 2 = 0 THEN NULL ELSE (SELECT j FROM v WHERE v.i = 1 + (o.i * 7) % 400) END,
		                   NULL,
		                   CASE WHEN o.i % 3 = 0 THEN (SELECT j FROM v WHERE v.i = 1 + (o.i * 29) % 400) END] AS vals
		        FROM o, (VALUES ('{spec,m1,status}'::text[]), ('{m2,zz,a}'), ('{metadata,spec,apiVersion}'), ('{k1,m3,nothing}')) k(keys))
		SELECT count(*), count(*) FILTER (WHERE r = (SELECT coalesce(jsonb_object_agg(key, coalesce(val, j -> key))
		                                                               FILTER (WHERE val IS NOT NULL OR j ? key), '{}')
		                                              FROM unnest(keys, vals) u(key, val)))
		  FROM (SELECT *, paidb_test_jsonb_selected(j, keys, vals) AS r FROM c) x}),
		"$ncomposed|$ncomposed", 'selected members are what jsonb itself would encode');

	# what is outside the spec is still checked as JSON
	for my $bad ('{"spec": {"a": 1}, "status": tru}', '{"spec": {"a": 1}} x', '{"spec": {"a": "1}',
		'{"spec": {"a": [1}, "b": 2}', '{"a": 1, "spec": }', '[{"spec": 1}]')
	{
		my ($rc, $out, $err) = $node->psql('postgres',
			"SELECT paidb_test_jsonb_without('" . ($bad =~ s/'/''/gr) . "', 'spec')");
		is($rc == 0 ? 'parsed' : $err =~ /invalid input syntax for type json|cannot|must/ ? 'refused' : $err,
			$bad =~ /^\[/ ? 'parsed' : 'refused', "malformed outside the spec: $bad");
	}
}

# ---------------------------------------------------------------------
note 'no credential in the logs';

my $log = slurp_file($node->logfile);
like($log, qr/kubernetes API request GET .* failed with HTTP status 401, reason Unauthorized/,
	'failures are logged with status and reason');
for my $t ($token1, $token2, @extra_tokens, $wrong_token)
{
	unlike($log, qr/\Q$t\E/, 'the token does not appear in the server log');
}

$node->stop;
$fake->stop;
done_testing();
