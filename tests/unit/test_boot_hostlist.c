/* Slurm host lists: the first host, and whether a host is in a list, for
 * each form Slurm writes (single names, comma lists, ranges with leading
 * zeros, several bracket groups, commas inside brackets) and what must be
 * refused, against hand-written answers. */
#include <stdio.h>
#include <string.h>

#include "boot/hostlist.h"

static int failures;

static void expect(const char* list, const char* want) {
  char got[64] = "?";
  int ok = gbBootHostlistFirst(list, got, sizeof(got));
  if (want ? !ok || strcmp(got, want) != 0 : ok) {
    failures++;
    printf("FAIL \"%s\": got %s \"%s\", want %s%s%s\n", list ? list : "(null)", ok ? "ok" : "refused", ok ? got : "",
           want ? "\"" : "refusal", want ? want : "", want ? "\"" : "");
  }
}

static void expectHas(const char* list, const char* host, int want) {
  int got = gbBootHostlistHas(list, host);
  if (got != want) {
    failures++;
    printf("FAIL \"%s\" has \"%s\": got %d, want %d\n", list ? list : "(null)", host ? host : "(null)", got, want);
  }
}

int main(void) {
  expect("vm", "vm");
  expect("node1,node2", "node1");
  expect("node[01-04]", "node01");
  expect("node[07,01-04]", "node07");
  expect("node[1-2],gpu[3-4]", "node1");
  expect("rack[1-2]-n[03-04]", "rack1-n03");
  expect("gpu-a100-[5]", "gpu-a100-5");
  expect("a.example.org,b.example.org", "a.example.org");
  expect("", NULL);
  expect(NULL, NULL);
  expect(",node1", NULL);
  expect("node[1-2", NULL);
  expect("node[]", NULL);
  expect("node]1", NULL);
  char small[4];
  if (gbBootHostlistFirst("node[01-04]", small, sizeof(small))) {
    failures++;
    printf("FAIL a 4-byte buffer took \"node01\"\n");
  }
  /* Membership: where a heterogeneous step's component 0 starts (boot/env.c). */
  expectHas("gbn[1-2]", "gbn2", 1);
  expectHas("gbn[1-2]", "gbn1", 1);
  expectHas("gbn[1-2]", "gbn3", 0);
  expectHas("gbn[1-2]", "gbn", 0);
  expectHas("gbn[1-2]", "gbn12", 0);
  expectHas("node[08-10]", "node09", 1);
  expectHas("node[08-10]", "node9", 0);
  expectHas("node[08-10]", "node10", 1);
  expectHas("node[8-10]", "node9", 1);
  expectHas("node[8-10]", "node09", 0);
  expectHas("node[07,01-04]", "node03", 1);
  expectHas("node[07,01-04]", "node05", 0);
  expectHas("a,b,node[1-2]", "b", 1);
  expectHas("a,b,node[1-2]", "node2", 1);
  expectHas("node[1-2],gpu[3-4]", "gpu4", 1);
  expectHas("node[1-2],gpu[3-4]", "gpu2", 0);
  expectHas("rack[1-2]-n[03-04]", "rack2-n04", 1);
  expectHas("rack[1-2]-n[03-04]", "rack2-n05", 0);
  expectHas("n[1-12]0", "n120", 1);  /* 12 then 0, after 1 then 20 fails */
  expectHas("n[1-12]0", "n130", 0);
  expectHas("a.example.org,b.example.org", "b.example.org", 1);
  expectHas("a.example.org,b.example.org", "b.example", 0);
  expectHas("", "a", 0);
  expectHas(NULL, "a", 0);
  expectHas("a", NULL, 0);
  expectHas("node[1-2", "node1", 0);
  expectHas("node[]", "node", 0);
  expectHas("node]1,a", "a", 0);
  expectHas("a,node]1", "a", 0);
  expectHas("a,", "a", 0);
  expectHas("node[x-2]", "node1", 0);
  if (failures) return 1;
  printf("PASS: Slurm host lists, first host and membership\n");
  return 0;
}
