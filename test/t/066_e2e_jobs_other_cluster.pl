# The seed's end-to-end tests (test/t/030_e2e_jobs.pl) on a cluster other than
# "default" (SPEC §11, issue 18): PaidbTest::new_node registers the fake as
# cluster "east", makes it paidb.default_cluster, points the settings of
# "default" at a port nobody listens on and removes "default"; every job of
# the test is placed in "east" and driven by east's own workers.
use strict;
use warnings;
use FindBin;
# loaded here, at compile time: their INIT blocks (log and port set-up)
# must run before the test file is read
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

$ENV{PAIDB_TEST_CLUSTER} = 'east';
my $test = "$FindBin::Bin/030_e2e_jobs.pl";
my $done = do $test;
die "$test: $@" if $@;
die "$test: $!" unless defined $done;
