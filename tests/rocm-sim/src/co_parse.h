// rocm-sim: code-object parsing (kernel names from AMDGPU ELF code objects, clang offload bundles,
// or the simulator's own text format "ROCMSIM-CO\n<name>\n<name>...").
#pragma once
#include <cstdint>
#include <cstring>
#include <elf.h>
#include <string>
#include <vector>

namespace sim {

static inline bool parse_elf_kernels(const uint8_t* p, size_t n, std::vector<std::string>& out) {
  if (n < sizeof(Elf64_Ehdr) || memcmp(p, ELFMAG, SELFMAG) != 0 || p[EI_CLASS] != ELFCLASS64) return false;
  const Elf64_Ehdr* eh = (const Elf64_Ehdr*)p;
  if (eh->e_shoff == 0 || eh->e_shoff + uint64_t(eh->e_shnum) * sizeof(Elf64_Shdr) > n) return false;
  const Elf64_Shdr* sh = (const Elf64_Shdr*)(p + eh->e_shoff);
  bool any = false;
  for (int i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) continue;
    if (sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr& strs = sh[sh[i].sh_link];
    if (sh[i].sh_offset + sh[i].sh_size > n || strs.sh_offset + strs.sh_size > n) continue;
    const Elf64_Sym* syms = (const Elf64_Sym*)(p + sh[i].sh_offset);
    size_t cnt = sh[i].sh_size / sizeof(Elf64_Sym);
    const char* st = (const char*)(p + strs.sh_offset);
    for (size_t k = 0; k < cnt; k++) {
      if (syms[k].st_name >= strs.sh_size) continue;
      const char* nm = st + syms[k].st_name;
      size_t l = strnlen(nm, strs.sh_size - syms[k].st_name);
      if (l > 3 && memcmp(nm + l - 3, ".kd", 3) == 0) {
        std::string s(nm, l - 3);
        bool dup = false;
        for (auto& o : out) if (o == s) { dup = true; break; }
        if (!dup) out.push_back(s);
        any = true;
      }
    }
    if (any) break;  // prefer the first table holding kernels
  }
  return true;
}

static inline bool parse_bundle_kernels(const uint8_t* p, size_t n, std::vector<std::string>& out) {
  static const char magic[] = "__CLANG_OFFLOAD_BUNDLE__";
  if (n < 32 || memcmp(p, magic, 24) != 0) return false;
  uint64_t count;
  memcpy(&count, p + 24, 8);
  size_t off = 32;
  for (uint64_t i = 0; i < count && off + 24 <= n; i++) {
    uint64_t eoff, esize, idlen;
    memcpy(&eoff, p + off, 8);
    memcpy(&esize, p + off + 8, 8);
    memcpy(&idlen, p + off + 16, 8);
    off += 24;
    if (off + idlen > n) break;
    std::string id((const char*)p + off, idlen);
    off += idlen;
    if (id.find("amdgcn") != std::string::npos && eoff + esize <= n)
      parse_elf_kernels(p + eoff, esize, out);
  }
  return true;
}

static inline bool parse_sim_co(const uint8_t* p, size_t n, std::vector<std::string>& out) {
  static const char magic[] = "ROCMSIM-CO\n";
  if (n < sizeof(magic) - 1 || memcmp(p, magic, sizeof(magic) - 1) != 0) return false;
  std::string s((const char*)p + sizeof(magic) - 1, n - (sizeof(magic) - 1));
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    std::string name = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (!name.empty() && name[0] != '\0') {
      if (name.size() > 3 && name.compare(name.size() - 3, 3, ".kd") == 0) name.resize(name.size() - 3);
      out.push_back(name);
    }
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return true;
}

// Returns 1 when the image format was recognised (names appended), 0 otherwise.
// `n` may be 0 for images of unknown size (ELF / bundle headers give the needed extents;
// callers pass a generous bound in that case).
static inline int parse_code_object(const void* image, size_t n, std::vector<std::string>& out) {
  const uint8_t* p = (const uint8_t*)image;
  if (!p) return 0;
  if (parse_sim_co(p, n, out)) return 1;
  if (parse_bundle_kernels(p, n, out)) return 1;
  if (parse_elf_kernels(p, n, out)) return 1;
  return 0;
}

// Size of an in-memory ELF image from its headers (section table end), 0 if not ELF.
static inline size_t elf_image_size(const void* image) {
  const uint8_t* p = (const uint8_t*)image;
  if (!p || memcmp(p, ELFMAG, SELFMAG) != 0 || p[EI_CLASS] != ELFCLASS64) return 0;
  const Elf64_Ehdr* eh = (const Elf64_Ehdr*)p;
  size_t end = eh->e_shoff + size_t(eh->e_shnum) * eh->e_shentsize;
  const Elf64_Shdr* sh = (const Elf64_Shdr*)(p + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; i++)
    if (sh[i].sh_type != SHT_NOBITS && sh[i].sh_offset + sh[i].sh_size > end) end = sh[i].sh_offset + sh[i].sh_size;
  return end;
}
static inline size_t bundle_image_size(const void* image) {
  const uint8_t* p = (const uint8_t*)image;
  if (!p || memcmp(p, "__CLANG_OFFLOAD_BUNDLE__", 24) != 0) return 0;
  uint64_t count;
  memcpy(&count, p + 24, 8);
  size_t off = 32, end = 32;
  for (uint64_t i = 0; i < count; i++) {
    uint64_t eoff, esize, idlen;
    memcpy(&eoff, p + off, 8);
    memcpy(&esize, p + off + 8, 8);
    memcpy(&idlen, p + off + 16, 8);
    off += 24 + idlen;
    if (eoff + esize > end) end = eoff + esize;
  }
  return end > off ? end : off;
}

}  // namespace sim
