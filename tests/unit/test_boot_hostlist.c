/* The first host of a Slurm host list: each form Slurm writes (single names,
 * comma lists, ranges with leading zeros, several bracket groups, commas
 * inside brackets) and what must be refused, against hand-written answers. */
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
  if (failures) return 1;
  printf("PASS: Slurm host lists, first host\n");
  return 0;
}
