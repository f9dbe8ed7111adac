# When the postmaster dies, paidb's workers stop at once and commit nothing
# more (issue 11): a framework watcher with a backlog of buffered events must
# not go on applying and committing them.  The watcher is frozen (SIGSTOP)
# while a few hundred jobs run in kube-fake, so their events pile up in its
# socket; the postmaster is killed with SIGKILL and the watcher let go
# (SIGCONT).  Every commit after that moment would be in the WAL, so after a
# restart a trigger's log of row writes (with clock_timestamp()) must show
# none later than the SIGCONT, and the workers must be gone within a bound.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use KubeFake;
use PaidbTest;

my $fake = PaidbTest::start_fake(args => [ '--history-size', '200000' ]);
my $node = PaidbTest::start_node('postmaster_death', $fake, retain_mode => 'on',
	resync_interval => '5s', restart_after_crash => 'off');

# Every row the workers write to the job tables, with the time it was written.
$node->safe_psql('postgres', q{
CREATE TABLE public.write_log (id bigserial PRIMARY KEY, pid int, tbl text,
                               at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION public.log_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.write_log (pid, tbl) VALUES (pg_backend_pid(), TG_TABLE_NAME);
    RETURN NULL;
END $$;
CREATE TRIGGER log_framework AFTER INSERT OR UPDATE ON paidb.framework
    FOR EACH ROW EXECUTE FUNCTION public.log_write();
CREATE TRIGGER log_event AFTER INSERT OR UPDATE ON paidb.framework_event
    FOR EACH ROW EXECUTE FUNCTION public.log_write();
});

my %pid = map { $_ => worker_pid($node, $_) } ('sync', 'framework watcher', 'event watcher');
ok($pid{$_} > 0, "the $_ runs (pid $pid{$_})") for sort keys %pid;
my $watcher = $pid{'framework watcher'};

# Freeze the framework watcher and let a few hundred jobs run meanwhile.
kill 'STOP', $watcher;
my $rv0 = $fake->resource_version;
$node->safe_psql('postgres', q{
SELECT count(*) FROM generate_series(1, 300) i,
  LATERAL paidb.put_framework_request(jsonb_build_object(
    'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
    'metadata', jsonb_build_object('name', 'pmjob' || i,
        'annotations', jsonb_build_object('kube-fake/run-seconds', '0.2')),
    'spec', jsonb_build_object('executionType', 'Start',
        'taskRoles', jsonb_build_array(jsonb_build_object('name', 'worker', 'taskNumber', 1,
            'task', jsonb_build_object('pod', jsonb_build_object('spec', jsonb_build_object(
                'containers', jsonb_build_array(jsonb_build_object('name', 'w', 'image', 'busybox'))))))))))});
ok(wait_until(sub { $fake->resource_version - $rv0 >= 2000 }, 120),
	'the jobs ran in kube-fake while the framework watcher was frozen (a backlog of events)');
my $applied_before = $node->safe_psql('postgres',
	"SELECT count(*) FROM public.write_log WHERE pid = $watcher");

# Kill the postmaster, then let the watcher go.
my $postmaster = $node->{_pid};
ok($postmaster, "the postmaster's pid is known ($postmaster)");
kill 'KILL', $postmaster;
ok(wait_until(sub { !kill(0, $postmaster) }, 10), 'the postmaster is gone');
my $cont = time();
kill 'CONT', $watcher;

# The workers are gone within a bound.
my $gone = wait_until(sub { !grep { kill(0, $_) } values %pid }, 20);
my $took = time() - $cont;
ok($gone, sprintf('every paidb worker exited after the postmaster died (%.2f s)', $took));
cmp_ok($took, '<', 5, 'and within 5 s');
# other backends of the dead server (none should be left) must go too before a restart
ok(wait_until(sub { system('pgrep', '-f', 'postgres: postmaster_death') != 0 }, 30),
	'no process of the dead server is left');

# Restart (without the workers, which would write at once): crash recovery
# replays every commit that reached the WAL.
$node->_update_pid(-1);    # the stale postmaster.pid
$node->append_conf('postgresql.conf', "paidb.enabled = off\n");
$node->start;
my $pids = join(',', values %pid);
my $later = $node->safe_psql('postgres',
	sprintf("SELECT count(*) FROM public.write_log WHERE at > to_timestamp(%.6f) AND pid IN (%s)",
		$cont, $pids));
is($later, '0', 'no worker committed a write after the postmaster had died');
note("framework watcher rows written before the freeze: $applied_before");

$node->stop('fast');
$fake->stop;
done_testing();
