#!/usr/bin/python3
"""Snapshot compressions the application could apply itself (issue 19).

  compression.py DIR

DIR holds train.tsv (snapshots of jobs that are not measured: what a
trained dictionary is built from) and one file per kind of job
(typical.tsv, big.tsv, ...): lines of name TAB snapshot as jsonb prints it
(typical-binary.tsv: jsonb's own binary form, in hex).
Prints, per kind, the median bytes of one snapshot under zlib and zstd,
without and with a preset dictionary, and zlib's time to compress and to
decompress one (the library paidb would link; zstd is timed by its CLI's
own benchmark, which this does not parse, so only its sizes are shown).

Three dictionaries:
  keys      the structure of a framework with every value blanked: only
            what frameworkcontroller and rest-server put in every job, so
            it could ship with paidb whatever the cluster runs;
  template  one whole job of another user (values too: image, commands,
            mount paths, as rest-server writes them for everyone);
  trained   zstd --train over the train/ jobs (optimistic: the bench's
            jobs come from one template).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib


def read_tsv(path):
    """The values of a kind's file; a kind named *-binary holds hex."""
    with open(path, 'rb') as f:
        vals = [line.rstrip(b'\n').split(b'\t', 1)[1] for line in f if b'\t' in line]
    if path.endswith('-binary.tsv'):
        vals = [bytes.fromhex(v.decode()) for v in vals]
    return vals


def blank(v):
    """The value with its scalars emptied: keys and nesting remain."""
    if isinstance(v, dict):
        return {k: blank(x) for k, x in v.items()}
    if isinstance(v, list):
        return [blank(x) for x in v[:2]]
    if isinstance(v, str):
        return ""
    if isinstance(v, bool) or v is None:
        return v
    return 0


def jsonb_text(v):
    # jsonb's output: ", " and ": ", keys in jsonb's order (as parsed)
    return json.dumps(v, ensure_ascii=False).encode()


def zstd_size(data, level, dict_path):
    cmd = ['zstd', '-q', '-c', '-%d' % level]
    if dict_path:
        cmd += ['-D', dict_path]
    return len(subprocess.run(cmd, input=data, stdout=subprocess.PIPE, check=True).stdout)


def timed_us(fn, arg, reps=200):
    t0 = time.perf_counter()
    for _ in range(reps):
        fn(arg)
    return (time.perf_counter() - t0) / reps * 1e6


def main():
    root = sys.argv[1]
    train = read_tsv(os.path.join(root, 'train.tsv'))
    kinds = [k[:-4] for k in sorted(os.listdir(root)) if k.endswith('.tsv') and k != 'train.tsv']
    work = tempfile.mkdtemp()
    dicts = {}
    # keys: the blanked structure of a train job, and of a train job's
    # task status repeated (a 1,000-task job is mostly task statuses)
    sample = json.loads(train[0])
    dicts['keys'] = jsonb_text(blank(sample))
    dicts['template'] = train[-1]
    tdir = os.path.join(work, 'train')
    os.mkdir(tdir)
    for i, t in enumerate(train):
        with open(os.path.join(tdir, '%d.json' % i), 'wb') as f:
            f.write(t)
    trained = os.path.join(work, 'trained.dict')
    subprocess.run(['zstd', '-q', '--train', '--maxdict=16384', '-o', trained] +
                   [os.path.join(tdir, f) for f in os.listdir(tdir)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dicts['trained'] = open(trained, 'rb').read()
    paths = {}
    for name, d in dicts.items():
        paths[name] = os.path.join(work, name + '.dict')
        with open(paths[name], 'wb') as f:
            f.write(d)
    print('dictionaries: keys %d bytes, template %d bytes, trained %d bytes' %
          (len(dicts['keys']), len(dicts['template']), len(dicts['trained'])))

    for kind in kinds:
        docs = read_tsv(os.path.join(root, kind + '.tsv'))
        rows = []

        def row(label, sizes):
            rows.append((label, statistics.median(sizes)))

        row('uncompressed', [len(d) for d in docs])
        row('zlib 6', [len(zlib.compress(d, 6)) for d in docs])
        for dn in ('keys', 'template'):
            def zc(d, dn=dn):
                c = zlib.compressobj(6, zdict=dicts[dn])
                return c.compress(d) + c.flush()
            row('zlib 6, %s dictionary' % dn, [len(zc(d)) for d in docs])
        for level in (3, 19):
            row('zstd %d' % level, [zstd_size(d, level, None) for d in docs])
            for dn in ('keys', 'template', 'trained'):
                row('zstd %d, %s dictionary' % (level, dn), [zstd_size(d, level, paths[dn]) for d in docs])
        print('%s (%d snapshots): median bytes of one' % (kind, len(docs)))
        for label, b in rows:
            print('  %-34s %9.0f' % (label, b))
        # zlib's cost per snapshot, with the keys dictionary
        d = docs[len(docs) // 2]
        c = zlib.compressobj(6, zdict=dicts['keys'])
        z = c.compress(d) + c.flush()

        def comp(x):
            c = zlib.compressobj(6, zdict=dicts['keys'])
            return c.compress(x) + c.flush()

        def decomp(x):
            o = zlib.decompressobj(zdict=dicts['keys'])
            return o.decompress(x) + o.flush()

        reps = 200 if len(d) < 100000 else 10
        print('  zlib 6 with the keys dictionary: compress %.0f us, decompress %.0f us (one snapshot of %d bytes)'
              % (timed_us(comp, d, reps), timed_us(decomp, z, reps), len(d)))


if __name__ == '__main__':
    main()
