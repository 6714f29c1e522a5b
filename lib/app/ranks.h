// app/ranks.h — the flags that say where the ranks go: --hosts and --hostfile (the machines
// --ranks starts them on, through mpirun), --shard-group (ZeRO's groups of K ranks, or the
// ranks of a machine) and --tp (groups of T ranks that split every layer). Parsed while the settings
// are read; a bad value exits 2 naming the flag.
#ifndef GPTMEM_RANKS_H
#define GPTMEM_RANKS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "app/usage.h"
#include "core/settings.h"
#include "io/files.h"
#include "parallel/comm.h"
#include "parallel/tensor.h"

// --shard-group K: a divisor of the ranks, with a ZeRO stage to shard (the
// ranks under mpirun are checked again once known, app/launch.h).
void check_shard_group(int k, int zero, int ranks, int tp) {
    if (!k) return;
    if (!zero) usage_error("--shard-group %d shards ZeRO's states in groups: add --zero 1, 2 or 3", k);
    if (ranks <= 1)
        usage_error("--shard-group %d needs several ranks (--ranks N, or mpirun -np N) to put in groups", k);
    if (tp > 1 && ranks % tp == 0) ranks /= tp;  // (--tp T: ZeRO's ranks are the data-parallel ones, one a group)
    if (k > ranks || ranks % k)
        usage_error("--shard-group %d must divide the %d %sranks (groups of K ranks, N/K of them): try one of the divisors of %d",
                    k, ranks, tp > 1 ? "data-parallel " : "", ranks);
}

// --hosts NAME:SLOTS,... (SLOTS 1 when left out) and --hostfile F: where --ranks starts the ranks.
// --hosts gives the ranks in all (the default of --ranks) and, when every machine has as many,
// the ranks a machine (what --shard-group node is in a dry run).
void parse_hosts(Settings *s) {
    if (!s->hosts && !s->hostfile) return;
    const char *flag = s->hosts ? "--hosts" : "--hostfile";
    if (s->hosts && s->hostfile) usage_error("--hosts and --hostfile both name the machines: give one of them");
    if (comm_launched())
        usage_error("%s goes to mpirun, and this process is already one of its ranks: give the machines to mpirun "
                    "(mpirun --host ... or --hostfile ...), or start ./train --ranks N %s ... alone", flag, flag);
    if (s->hostfile && unreadable_why(s->hostfile))
        usage_error("--hostfile '%s' cannot be read: %s", s->hostfile, unreadable_why(s->hostfile));
    if (s->hostfile && s->ranks < 2) usage_error("--hostfile starts ranks: give --ranks N (the ranks in all)");
    if (!s->hosts) return;
    char list[1024];
    snprintf(list, sizeof list, "%s", s->hosts);
    s->host_each = -1;
    for (char *h = strtok(list, ","); h; h = strtok(NULL, ",")) {
        char *colon = strchr(h, ':'), *end = NULL;
        long slots = 1;
        if (colon) *colon = 0, slots = strtol(colon + 1, &end, 10);
        if (*h == '-' || strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-[]") != strlen(h))
            usage_error("--hosts: '%s' is not a machine name (letters, digits, '.', '_' and '-', not first)", h);
        if (!*h || (colon && (end == colon + 1 || *end || slots < 1 || slots > 4096)))
            usage_error("--hosts: '%s%s%s' is not NAME or NAME:SLOTS (a machine and the ranks to start on it, 1 to 4096)",
                        h, colon ? ":" : "", colon ? colon + 1 : "");
        s->host_slots += (int)slots;
        s->host_each = s->host_each == -1 || s->host_each == slots ? (int)slots : 0;
    }
    if (s->host_slots < 1) usage_error("--hosts names no machine (NAME:SLOTS,...)");
    if (!s->ranks) s->ranks = s->host_slots;
    if (s->ranks > s->host_slots)
        usage_error("--ranks %d is more than the %d slots --hosts '%s' names; give each machine its ranks (NAME:SLOTS)",
                    s->ranks, s->host_slots, s->hosts);
    if (s->ranks != s->host_slots) s->host_each = 0;  // (mpirun fills the machines in order: not even)
    if (s->ranks < 2 && !s->dry_run) usage_error("--hosts starts ranks on the machines it names: give 2 or more slots");
}

// --shard-group K or node. node is the ranks of a machine: known once the ranks run (app/machines.h),
// or in a dry run from --hosts when every machine has as many.
void parse_shard_group(Settings *s) {
    if (!s->shard_group_str) return;
    if (!strcmp(s->shard_group_str, "node")) {
        s->shard_group_node = 1;
        if (!s->zero) usage_error("--shard-group node shards ZeRO's states inside each machine: add --zero 1, 2 or 3");
        if (!s->dry_run) return;
        if (!s->host_each)
            usage_error("--shard-group node in a dry run: say how many ranks each machine has, with --hosts a:4,b:4 (as "
                        "many on each), or give --shard-group 4");
        s->shard_group = s->tp > 1 && s->host_each % s->tp == 0 ? s->host_each / s->tp : s->host_each;  // (--tp: data ranks)
    } else {
        char *end;
        long k = strtol(s->shard_group_str, &end, 10);
        if (end == s->shard_group_str || *end || k < 0 || k > 1 << 20)
            usage_error("--shard-group must be a number of ranks (0 to %d) or node (got '%s')", 1 << 20, s->shard_group_str);
        s->shard_group = (int)k;
    }
    if (!s->shard_group) return;
    if (s->ranks > 1 || !comm_launched()) check_shard_group(s->shard_group, s->zero, s->ranks, s->tp);
    else if (!s->zero) check_shard_group(s->shard_group, 0, 2, 1);
}

// --tp T over the run's ranks (--ranks N, or mpirun's, once known: app/launch.h): groups of T ranks, the
// groups replicas of each other (data parallel, with --zero over them).
void check_tp(int t, int ranks) {
    if (t == 1) return;
    if (ranks < t || ranks % t)
        usage_error("--tp %d puts the ranks in groups of %d, and there are %d: give --ranks (or mpirun -np) a multiple "
                    "of %d", t, t, ranks, t);
}

// --tp T: every split width a multiple of T (the query heads, the key-value heads, the MLP's hidden
// width), and what it does not take yet refused; then the run's model is a rank's share of it
// (core/config.h tp_share; --sp: its slice of the rows, seq_split), the whole kept apart for what is said of the model and its first weights.
void parse_tp(Settings *s) {
    const GPTConfig *c = &s->cfg;
    int t = s->tp;
    s->whole = *c;
    if (s->sp && t == 1) usage_error("--sp cuts the rows of a --tp group's residual path: it goes with --tp T (T > 1)");
    if (t == 1) return;
    if (s->sp && s->seq_len % t)
        usage_error("--sp cuts each micro-batch's rows in %d slices, a sequence's %d positions among them: give a "
                    "--seq-len that %d divides", t, s->seq_len, t);
    struct { const char *what; int n; } widths[] = {
        {"query heads (--heads)", c->heads}, {"key-value heads (--kv-heads)", cfg_kv_heads(c)}, {"MLP width (--ffn)", cfg_ffn(c)},
        {"vocabulary padded to a multiple of 64 (--vocab)", padded_vocab(c)}};
    for (int i = 0; i < 4; i++)
        if (widths[i].n % t)
            usage_error("--tp %d splits the model's %s, %d, in %d: give a --tp that divides %d", t, widths[i].what,
                        widths[i].n, t, widths[i].n);
    const char *no = s->lora.rank ? "--lora" : s->eval_only ? "--eval-only" : NULL;
    if (s->fit) usage_error("--fit tries every --tp that divides the ranks and the model's heads and widths: drop --tp %d", t);
    if (no)
        usage_error("--tp splits every layer over a group of ranks; %s with --tp is not built yet: drop it "
                    "(doc/tensor-parallel.md says what --tp takes)", no);
    if (s->dry_run || s->ranks > 1) check_tp(t, s->ranks > 1 ? s->ranks : 1);  // (--ranks auto: one)
    if (s->host_each && s->host_each % t)  // (--hosts with as many ranks on each machine: a group inside one)
        usage_error("--tp %d keeps each group of %d ranks inside a machine, and --hosts gives each machine %d: give "
                    "machines a multiple of %d ranks, or a --tp that divides %d", t, t, s->host_each, t, s->host_each);
    s->cfg = tp_share(c, t);
    s->cfg.seq_split = s->sp ? t : 0;
}

#endif
