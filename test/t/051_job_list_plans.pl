# Every job-list query of rest-server, exactly as Sequelize 5.21.3 emits it
# (test/bench/queries_shapes.sql), through the openpai views, is served by
# paidb.job_summary's indexes (SPEC §10, docs/queries.md):
#
#   * no plan reads paidb.framework: the view's LEFT JOIN on its primary
#     key is removed, so lists and counts never touch the wide rows;
#   * no page query scans paidb.job_summary sequentially, and a
#     tagsContain page runs no has-a-tag sub-plan per job (the IN beside
#     it implies it: src/openpai_tags.c) and walks one page of the tag's
#     jobs in submission order from paidb.tag's index (several tags: a
#     page of each, from the newest of their 20th times on);
#   * a count whose filter reads only the count key (user, VC, state,
#     priority) is answered from the counts (src/openpai_counts.c); one
#     that also excludes tags (NOT IN) from the counts less the tagged
#     jobs, never scanning the job list; one of the jobs carrying given
#     tags (and nothing else) on the tags alone; every other count from
#     the job list;
#   * without that rewrite, a user's, a VC + state's and a state's count
#     through the views is an index-only scan;
#   * every count through the views, rewritten or not, equals count(*) by a
#     plain scan.
#
# 30,000 jobs of test/bench/queries_data.sql, analyzed: enough for the
# planner to prefer indexes where they matter at a million.
use strict;
use warnings;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PaidbTest qw(job_count_errors_sql);
use FindBin;
use Cwd qw(abs_path);

my $root = abs_path("$FindBin::RealBin/../..");
my $node = PostgreSQL::Test::Cluster->new('job_list_plans');
$node->init;
# paidb preloaded as in production (the count rewrite is its library's),
# without workers
$node->append_conf('postgresql.conf', "random_page_cost = 1.1\n"
	. "shared_preload_libraries = 'paidb'\npaidb.enabled = off\n");
$node->start;

my $trgm = $node->safe_psql('postgres',
	q{SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_trgm'});
$node->safe_psql('postgres', 'CREATE EXTENSION pg_trgm') if $trgm;
$node->safe_psql('postgres', "CREATE EXTENSION paidb CASCADE");
$node->safe_psql('postgres', "CREATE EXTENSION paidb_openpai");
$node->safe_psql('postgres', "\\set jobs 30000\n\\i $root/test/bench/fixtures.sql\n\\i $root/test/bench/queries_data.sql\n");
$node->safe_psql('postgres', 'VACUUM ANALYZE');

# The shapes: "-- label page|count" then the query on one line.
my @shapes;
open my $fh, '<', "$root/test/bench/queries_shapes.sql" or die $!;
my $label;
while (<$fh>)
{
	chomp;
	if (/^-- (\S+) (page|count)$/) { $label = "$1_$2"; next; }
	if ($label && /\S/) { s/;\s*$//; push @shapes, [ $label, $_ ]; undef $label; }
}
close $fh;
cmp_ok(scalar(@shapes), '>=', 40, 'the shapes file holds the list and count queries (' . scalar(@shapes) . ')');

# Every relation a plan reads, with its scan type.
sub scans
{
	my ($plan, $acc) = @_;
	push @$acc, [ $plan->{'Node Type'}, $plan->{'Relation Name'} ] if $plan->{'Relation Name'};
	scans($_, $acc) for @{ $plan->{Plans} // [] };
	return $acc;
}

my $json = JSON::PP->new;
for my $s (@shapes)
{
	my ($name, $sql) = @$s;
	my $out = $node->safe_psql('postgres', "SET search_path = openpai; EXPLAIN (FORMAT JSON) $sql");
	my $scans = scans($json->decode($out)->[0]{Plan}, []);
	my @framework = grep { $_->[1] eq 'framework' } @$scans;
	is(scalar(@framework), 0, "$name does not read paidb.framework")
	  or diag(join(', ', map { "$_->[0] on $_->[1]" } @$scans));
	if ($name =~ /_page$/)
	{
		my @seq = grep { $_->[0] eq 'Seq Scan' && $_->[1] eq 'job_summary' } @$scans;
		is(scalar(@seq), 0, "$name scans no job list sequentially")
		  or diag(join(', ', map { "$_->[0] on $_->[1]" } @$scans));
		# tagsContain: the has-a-tag test beside the IN is dropped
		# (src/openpai_tags.c), so no sub-plan runs per walked job
		if ($sql =~ /\) IS NOT NULL/)
		{
			my $text = $node->safe_psql('postgres', "SET search_path = openpai; EXPLAIN (COSTS OFF) $sql");
			unlike($text, qr/SubPlan \d+\) IS NOT NULL/, "$name runs no has-a-tag sub-plan per job");
			my $kept = $node->safe_psql('postgres', "SET paidb.openpai_tag_rewrite = off;
				SET search_path = openpai; EXPLAIN (COSTS OFF) $sql");
			like($kept, qr/SubPlan \d+\) IS NOT NULL/, "$name has that sub-plan without the rewrite");
			# in submission order, it walks the tag's own index (with the
			# user's, beside one user) and stops after a page
			my $index = $sql =~ /"userName" IN \('[^',]*'\)/ ? 'tag_user_submission_idx' : 'tag_submission_idx';
			my $run = $node->safe_psql('postgres', "SET search_path = openpai;
				EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) $sql");
			my ($tags) = $sql =~ /"tags"\."name" IN \(([^)]*)\)/;
			my $several = ($tags =~ tr/,//) + 1;
			if ($several == 1)
			{
				my ($walked) = $run =~ /Index Only Scan Backward using $index on tag[^\n]*actual rows=(\d+)/;
				ok(defined $walked && $walked <= 20, "$name walks $index newest first, one page of it ("
					  . ($walked // 'not used') . ' rows)') or diag($run);
			}
			else
			{
				# several tags: read from the newest of their 20th times on,
				# a page of rows of each at most
				like($run, qr/job_submission_time >= COALESCE\(GREATEST\(/,
					"$name reads the tags from the newest of their 20th times on");
				# each tag's 20th time from its index, then the page's rows:
				# no scan of paidb.tag reads more (sorting all of a tag's
				# rows for its 20th read them all)
				my @rows = $run =~ /Scan[^\n]* on tag\b[^\n]*actual rows=(\d+)/g;
				ok(@rows >= $several + 1 && !(grep { $_ > 20 * $several } @rows),
					"$name reads at most a page of each tag's rows (@rows)") or diag($run);
			}
		}
	}
	else
	{
		# the same count three ways: as sent (rewritten to the counts where
		# its filter allows), through the indexes, and by a plain scan
		my $view = $node->safe_psql('postgres', "SET search_path = openpai; $sql");
		my $indexed = $node->safe_psql('postgres', "SET paidb.openpai_count_rewrite = off;
			SET search_path = openpai; $sql");
		my $plain = $node->safe_psql('postgres', "SET paidb.openpai_count_rewrite = off;
			SET enable_indexscan = off; SET enable_bitmapscan = off;
			SET enable_indexonlyscan = off; SET search_path = openpai; $sql");
		is($view, $plain, "$name: as sent it counts what a scan counts ($view)");
		is($indexed, $plain, "$name: the indexes count what a scan counts ($indexed)");
		# filters on the count key only are answered from the counts
		# (the count key: the columns its filter names are all key columns,
		# and it has no sub-select)
		my %key = map { $_ => 1 } qw(userName virtualCluster state jobPriority archived);
		# tagsNotContain: rewritten as the key count less the tagged jobs
		(my $rest = $sql) =~ s/"framework"\."name" NOT IN \(SELECT "frameworkName" FROM "tags" WHERE "tags"\."name" IN \([^)]*\)\)//;
		my $complement = $rest ne $sql;
		my @columns = $rest =~ /"framework"\."(\w+)"/g;
		my $selects = () = $rest =~ /\bSELECT\b/gi;
		my $key_only = !(grep { !$key{$_} } @columns) && $selects == 1;
		my @summary = grep { $_->[1] eq 'job_summary' } @$scans;
		my @counts = grep { $_->[1] =~ /^job_count/ } @$scans;
		my @seq = grep { $_->[0] eq 'Seq Scan' && $_->[1] eq 'job_summary' } @$scans;
		if ($key_only && $complement)
		{
			ok(@counts && !@seq, "$name is the counts less the tagged jobs, with no scan of the job list")
			  or diag(join(', ', map { "$_->[0] on $_->[1]" } @$scans));
		}
		elsif ($key_only)
		{
			ok(@counts && !@summary, "$name is answered from the counts")
			  or diag(join(', ', map { "$_->[0] on $_->[1]" } @$scans));
		}
		elsif ($sql =~ /WHERE "framework"\."name" IN \(SELECT "frameworkName" FROM "tags" WHERE "tags"\."name" IN \([^)]*\)\)\s*$/)
		{
			# tagsContain alone: the jobs carrying the tags, on the tags
			ok(!@counts && !@summary && (grep { $_->[1] eq 'tag' } @$scans),
				"$name is counted on the tags alone")
			  or diag(join(', ', map { "$_->[0] on $_->[1]" } @$scans));
		}
		else
		{
			ok(!@counts, "$name counts the job list (its filter reads more than the count key)")
			  or diag(join(', ', map { "$_->[0] on $_->[1]" } @$scans));
		}
		# a keyword beside one user: the user's index carries the searched
		# columns, so the count reads no table (issue 17, paidb 0.3)
		if ($name eq 'user_keyword_count')
		{
			my @user_index = grep { $_->[0] eq 'Index Only Scan' && $_->[1] eq 'job_summary' } @$scans;
			ok(@user_index && !(grep { $_->[1] eq 'job_summary' && $_->[0] ne 'Index Only Scan' } @$scans),
				"$name reads the user's index alone")
			  or diag(join(', ', map { "$_->[0] on $_->[1]" } @$scans));
		}
		# without the rewrite, a user's, a VC's and a state's jobs are
		# counted from an index alone
		if ($name =~ /^(user|vc_state|state)_count$/)
		{
			my $off = $node->safe_psql('postgres',
				"SET paidb.openpai_count_rewrite = off; SET search_path = openpai; EXPLAIN (FORMAT JSON) $sql");
			my $off_scans = scans($json->decode($off)->[0]{Plan}, []);
			my @heap = grep { $_->[1] eq 'job_summary' && $_->[0] ne 'Index Only Scan' } @$off_scans;
			is(scalar(@heap), 0, "$name is an index-only scan without the rewrite")
			  or diag(join(', ', map { "$_->[0] on $_->[1]" } @$off_scans));
		}
	}
}
# user, VC, state and priority counts from paidb.job_counts equal count(*)
is($node->safe_psql('postgres', job_count_errors_sql()), '0', 'job_counts equals count(*) for the data set');

$node->stop;
done_testing();
