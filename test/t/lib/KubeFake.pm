
# KubeFake — start, drive and stop test/kube-fake/kube-fake from TAP tests.
#
#   use lib 'test/t/lib';            # or prove -I test/t/lib
#   use KubeFake;
#   my $fake = KubeFake->start(dir => $tempdir, token_file => $tf,
#                              bookmark_interval => 1);
#   $node->append_conf('postgresql.conf',
#       "paidb.k8s_api_server = '" . $fake->url . "'");
#   $fake->fault(status => 503, count => 1, retryAfter => 2);
#   my ($code, $obj) = $fake->api(GET => '/api/v1/namespaces/default/secrets');
#
# The fake listens on a free port (--port 0 --port-file F); its /_fake/ admin
# API is always also served on a second, plain-HTTP port, so that it can be
# driven even when the API port speaks TLS or is paused.  Every fake started
# is stopped (SIGTERM, then SIGKILL) when the test ends.

package KubeFake;

use strict;
use warnings;

use Carp;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Temp ();
use HTTP::Tiny;
use JSON::PP;
use POSIX ();
use Time::HiRes qw(usleep);

my @running;
my $counter = 0;
my $json = JSON::PP->new->canonical->allow_nonref;

# Path of the kube-fake program: $ENV{KUBE_FAKE}, or next to this module's tree
sub program
{
	return $ENV{KUBE_FAKE} if $ENV{KUBE_FAKE};
	return abs_path(dirname(__FILE__) . '/../../kube-fake/kube-fake');
}

# Start a fake.  Options: dir, token, token_file, tls_cert, tls_key,
# simulate_controller (bool), history_size, bookmark_interval, log (request
# log file, kept as $fake->{request_log}), args (array ref of further
# arguments), timeout (seconds to wait for it to listen, default 30).
sub start
{
	my ($class, %o) = @_;
	my $dir = $o{dir} // File::Temp::tempdir('kube-fake-XXXXXX', TMPDIR => 1, CLEANUP => 1);
	$counter++;
	my $base = "$dir/kube-fake-$$-$counter";
	my $port_file = "$base.port";
	my $admin_file = "$base.admin-port";
	my $out = "$base.out";
	unlink $port_file, $admin_file;

	my @args = (program(), '--port', $o{port} // 0, '--port-file', $port_file,
		'--admin-port', 0, '--admin-port-file', $admin_file);
	push @args, '--token', $o{token} if defined $o{token};
	push @args, '--token-file', $o{token_file} if defined $o{token_file};
	push @args, '--tls-cert', $o{tls_cert}, '--tls-key', $o{tls_key}
	  if defined $o{tls_cert};
	push @args, '--simulate-controller' if $o{simulate_controller};
	push @args, '--history-size', $o{history_size} if defined $o{history_size};
	push @args, '--bookmark-interval', $o{bookmark_interval}
	  if defined $o{bookmark_interval};
	push @args, '--log', $o{log} if defined $o{log};
	push @args, @{ $o{args} } if $o{args};

	my $pid = fork();
	croak "fork failed: $!" unless defined $pid;
	if ($pid == 0)
	{
		open(STDIN, '<', '/dev/null');
		open(STDOUT, '>>', $out) or POSIX::_exit(126);
		open(STDERR, '>&', \*STDOUT) or POSIX::_exit(126);
		exec(@args) or POSIX::_exit(127);
	}

	my $self = bless {
		pid => $pid,
		dir => $dir,
		out => $out,
		scheme => defined $o{tls_cert} ? 'https' : 'http',
		token => $o{token},
		token_file => $o{token_file},
		request_log => $o{log},
		args => \@args,
	}, $class;
	push @running, $self;

	my $deadline = time() + ($o{timeout} // 30);
	while (1)
	{
		my $port = _read_port($port_file);
		my $admin = _read_port($admin_file);
		if (defined $port && defined $admin)
		{
			$self->{port} = $port;
			$self->{admin_port} = $admin;
			last;
		}
		if (waitpid($pid, POSIX::WNOHANG()) == $pid)
		{
			delete $self->{pid};
			croak "kube-fake exited at start (status $?): " . $self->output;
		}
		if (time() > $deadline)
		{
			$self->stop;
			croak "kube-fake did not listen in time: " . $self->output;
		}
		usleep(20_000);
	}
	return $self;
}

# Read a port number written by the fake, or undef
sub _read_port
{
	my ($file) = @_;
	open(my $fh, '<', $file) or return undef;
	my $line = <$fh>;
	close($fh);
	return undef unless defined $line && $line =~ /^(\d+)/;
	return $1;
}

# Base URL of the API, e.g. http://127.0.0.1:4242
sub url
{
	my ($self) = @_;
	return "$self->{scheme}://127.0.0.1:$self->{port}";
}

# The API port, the admin port and the process id
sub port { return $_[0]->{port}; }
sub admin_port { return $_[0]->{admin_port}; }
sub pid { return $_[0]->{pid}; }

# What the fake printed on stdout/stderr so far
sub output
{
	my ($self) = @_;
	open(my $fh, '<', $self->{out}) or return '';
	local $/;
	my $text = <$fh>;
	close($fh);
	return $text // '';
}

# Call the /_fake/ admin API (plain HTTP); returns the decoded JSON answer
sub admin
{
	my ($self, $method, $path, $body) = @_;
	my $http = HTTP::Tiny->new(timeout => 30);
	my %req = (headers => { 'Content-Type' => 'application/json' });
	$req{content} = $json->encode($body) if defined $body;
	my $res = $http->request($method,
		"http://127.0.0.1:$self->{admin_port}$path", \%req);
	croak "kube-fake admin $method $path failed: $res->{status} $res->{content}"
	  unless $res->{success};
	return $json->decode($res->{content});
}

# Call the Kubernetes API of a plain-HTTP fake; returns (status, decoded body)
sub api
{
	my ($self, $method, $path, $body, $content_type) = @_;
	croak "KubeFake::api only speaks plain HTTP" if $self->{scheme} ne 'http';
	my %headers = (Accept => 'application/json');
	my $token = $self->{token};
	if (!defined $token && defined $self->{token_file})
	{
		open(my $fh, '<', $self->{token_file}) or croak "token file: $!";
		local $/;
		$token = <$fh>;
		close($fh);
		$token =~ s/\s+$//;
	}
	$headers{Authorization} = "Bearer $token" if defined $token;
	my %req = (headers => \%headers);
	if (defined $body)
	{
		$headers{'Content-Type'} = $content_type // 'application/json';
		$req{content} = ref $body ? $json->encode($body) : $body;
	}
	my $res = HTTP::Tiny->new(timeout => 30)->request($method, $self->url . $path, \%req);
	my $decoded = eval { $json->decode($res->{content}) };
	return ($res->{status}, $decoded // $res->{content});
}

# Inject a fault: status, count, verb, path (regex), resource, name, message,
# reason, retryAfter, phase (before|after), action (error|drop), inStream
sub fault
{
	my ($self, %rule) = @_;
	return $self->admin(POST => '/_fake/faults', \%rule)->{id};
}

# Add latency: seconds, count (-1: forever), verb, path, resource, name
sub latency
{
	my ($self, %rule) = @_;
	return $self->admin(POST => '/_fake/latency', \%rule)->{id};
}

# Remove every fault and latency rule
sub clear_faults
{
	my ($self) = @_;
	$self->admin(DELETE => '/_fake/faults');
	$self->admin(DELETE => '/_fake/latency');
	return;
}

# Cut the open watches: mode reset, end or mid-event; returns how many
sub cut_watches
{
	my ($self, $mode, $resource) = @_;
	my %p = (mode => $mode // 'reset');
	$p{resource} = $resource if defined $resource;
	return $self->admin(POST => '/_fake/watches/cut', \%p)->{cut};
}

# The open watches (array of {resource, namespace, path, resourceVersion})
sub watches
{
	my ($self) = @_;
	return $self->admin(GET => '/_fake/watches')->{watches};
}

# Wait until at least n watches are open (default 1); true if they are
sub wait_for_watches
{
	my ($self, $n, $timeout) = @_;
	$n //= 1;
	my $deadline = time() + ($timeout // 30);
	while (time() <= $deadline)
	{
		return 1 if scalar(@{ $self->watches }) >= $n;
		usleep(20_000);
	}
	return 0;
}

# Forget history up to rv (default: everything): older RVs get 410 Expired
sub compact
{
	my ($self, $rv) = @_;
	my %p;
	$p{resourceVersion} = $rv if defined $rv;
	return $self->admin(POST => '/_fake/compact', \%p);
}

# The current global resourceVersion
sub resource_version
{
	my ($self) = @_;
	return $self->admin(GET => '/_fake/rv')->{resourceVersion};
}

# Request counters: {total, requests, responses, creates, createAttempts}
sub counters
{
	my ($self) = @_;
	return $self->admin(GET => '/_fake/counters');
}

# Pause the API port (mode refuse or hang, optionally for some seconds)
sub pause
{
	my ($self, $mode, $seconds) = @_;
	my %p = (mode => $mode // 'refuse');
	$p{seconds} = $seconds if defined $seconds;
	return $self->admin(POST => '/_fake/server/pause', \%p);
}

# Resume a paused API port
sub resume
{
	my ($self) = @_;
	return $self->admin(POST => '/_fake/server/resume', {});
}

# Stop the fake: SIGTERM, then SIGKILL after 10 s
sub stop
{
	my ($self) = @_;
	my $pid = delete $self->{pid};
	return unless $pid;
	kill 'TERM', $pid;
	my $deadline = time() + 10;
	while (time() <= $deadline)
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
	# keep the test's exit status
	local $?;
	$_->stop for @running;
}

1;
