// @ts-check
// Chinese and English for every visible string. The English text is the key (so the code reads as
// the page does); ZH maps it to Chinese. Static elements are marked in index.html with
// data-i18n (text), data-i18n-title, data-i18n-aria and data-i18n-placeholder; translateDom()
// remembers each element's English text the first time and re-translates from it.

/** @typedef {'en' | 'zh'} Lang */

const LANG_KEY = 'probelens.lang';

/** @type {Lang} */
let current = 'en';

/** @type {Record<string, string>} */
export const ZH = {
  // page and header
  'probelens — msprobe NPU vs Bench graph compare': 'probelens — msprobe NPU 与标杆图比对',
  'No data loaded.': '尚未加载数据。',
  'Legend: precision classes with node counts': '图例：精度等级及节点数',
  'Keyboard shortcuts (?)': '键盘快捷键 (?)',
  'Keyboard shortcuts': '键盘快捷键',
  Close: '关闭',
  'zoom in / out about the pointer': '以指针为中心放大 / 缩小',
  'pan left / right': '向左 / 向右平移',
  'drag, wheel': '拖动、滚轮',
  'pan, zoom about the pointer': '平移、以指针为中心缩放',
  'move in the outline, collapse / expand': '在大纲中移动、折叠 / 展开',
  'expand or collapse the selected node': '展开或折叠选中的节点',
  'double-click': '双击',
  'expand or collapse a node': '展开或折叠节点',
  'Ctrl/⌘-click': 'Ctrl/⌘ + 单击',
  'pick a node for a manual match without moving the selection': '选取节点用于手动匹配，不改变当前选中',
  'match the two picked nodes': '匹配选取的两个节点',
  'undo / redo a match or unmatch': '撤销 / 重做匹配或取消匹配',
  'search node names': '搜索节点名称',
  'this help': '本帮助',
  'Demo: a tiny Qwen2.5 run as Megatron (NPU, left) vs Hugging Face (Bench, right). To compare your own runs, choose a dump folder per side (Folder… or drop it on the card); nothing is uploaded.':
    '演示：一个小型 Qwen2.5，Megatron（NPU，左）对比 Hugging Face（标杆，右）。要比对你自己的运行，请为每侧选择一个 dump 文件夹（“文件夹…”或拖放到卡片上）；数据不会上传。',
  'Hide this line': '隐藏此行',
  'library frames': '库代码的栈帧',
  'in the search: next / previous hit': '在搜索框中：下一个 / 上一个结果',
  'close this help; leave the search box or the mapping editor': '关闭本帮助；离开搜索框或映射编辑器',
  // inputs
  Inputs: '输入',
  'Debug / NPU': '调试侧 / NPU',
  Bench: '标杆侧',
  NPU: 'NPU',
  'Folder…': '文件夹…',
  Clear: '清除',
  'Show the Bench side alone (build view)': '只显示标杆侧（构图视图）',
  'Show the NPU side alone (build view)': '只显示 NPU 侧（构图视图）',
  'Choose the NPU (debug) dump folder': '选择 NPU（调试侧）dump 文件夹',
  'Choose the Bench dump folder': '选择标杆侧 dump 文件夹',
  'drop a dump folder here': '将 dump 文件夹拖放到此处',
  '{n} file': '{n} 个文件',
  '{n} files': '{n} 个文件',
  'not shown: see the error': '未显示：见错误信息',
  'Layer mapping': '层映射',
  Source: '来源',
  'Choose a layer mapping YAML file': '选择层映射 YAML 文件',
  'Layer mapping source': '层映射来源',
  'no YAML (built-in rules)': '无 YAML（内置规则）',
  'msprobe output': 'msprobe 输出文件',
  'Open…': '打开…',
  'Open a .vis.db (msprobe 26.x, probelens) or a legacy .vis JSON (msprobe 8.1 and older); gzipped files too': '打开 .vis.db（msprobe 26.x、probelens）或旧版 .vis JSON（msprobe 8.1 及更早）；也支持 gzip 压缩文件',
  'Open a msprobe .vis.db or .vis file': '打开 msprobe 的 .vis.db 或 .vis 文件',
  'not used: showing {file}': '未使用：正在显示 {file}',
  '.vis JSON (msprobe ≤ 8.1)': '.vis JSON（msprobe ≤ 8.1）',
  Options: '选项',
  'layer mapping': '层映射',
  'fuzzy match': '模糊匹配',
  'overflow check': '溢出检测',
  'Parallel merge': '并行合并',
  'rank size': '卡数',
  order: '顺序',
  'merged rank': '合并卡',
  'cannot be read': '无法读取',
  '--rank_size/--tp/--pp/--vpp/--order: merge the ranks of the step into one graph per parallel group before comparing (one value for both sides, or NPU and Bench values separated by a space)':
    '--rank_size/--tp/--pp/--vpp/--order：比对前将该步的各卡按并行组合并为一张图（一个值用于两侧，或以空格分隔 NPU 与标杆的值）',
  '--rank_size: number of ranks of a side (empty: no merge)': '--rank_size：一侧的卡数（留空：不合并）',
  '--tp: tensor parallel size': '--tp：张量并行数',
  '--pp: pipeline parallel size': '--pp：流水线并行数',
  '--vpp: virtual pipeline size (empty: 1)': '--vpp：虚拟流水线数（留空：1）',
  "--order: Megatron's order of the parallel dimensions (empty: tp-cp-ep-dp-pp)": '--order：Megatron 并行维度的顺序（留空：tp-cp-ep-dp-pp）',
  'rank size (--rank_size)': '卡数（--rank_size）',
  'tensor parallel size (--tp)': '张量并行数（--tp）',
  'pipeline parallel size (--pp)': '流水线并行数（--pp）',
  'virtual pipeline size (--vpp)': '虚拟流水线数（--vpp）',
  'parallel order (--order)': '并行顺序（--order）',
  '-lm: map layer names with the mapping (bare -lm when no YAML is chosen)': '-lm：按映射文件映射层名（未选 YAML 时为不带参数的 -lm）',
  '-fm: fuzzy matching of node names': '-fm：节点名称模糊匹配',
  '-oc: overflow check': '-oc：溢出检测',
  Step: '步',
  Rank: '卡',
  step: '步',
  rank: '卡',
  'Micro-step': '微步',
  all: '全部',
  'sync expand': '同步展开',
  'Expand/collapse the matched node in the other pane too': '在另一侧同步展开/折叠对应节点',
  minimap: '小地图',
  'Show a minimap in each pane': '在每个窗格中显示小地图',
  Demo: '示例',
  // progress
  '{stage} — {done} of {total}': '{stage} — {done} / {total}',
  'Starting the core': '正在启动核心',
  'Reading NPU files': '正在读取 NPU 文件',
  'Reading Bench files': '正在读取标杆侧文件',
  'Checking NPU files': '正在检查 NPU 文件',
  'Checking Bench files': '正在检查标杆侧文件',
  'Checking folder layout': '正在检查文件夹结构',
  'Building and comparing graphs': '正在构图并比对',
  'Preparing the graphs': '正在准备图数据',
  'Laying out': '正在布局',
  'Opening the file': '正在打开文件',
  'Exporting the compare table': '正在导出比对表',
  Matching: '正在匹配',
  'Reading the demo': '正在读取示例',
  'Restoring the shown result': '正在恢复当前显示的结果',
  // panes, legend, summary
  'Debug / NPU graph': '调试侧 / NPU 图',
  'Bench graph': '标杆侧图',
  'NPU nodes': 'NPU 节点',
  'Bench nodes': '标杆侧节点',
  'NPU graph (use the outline for keyboard navigation)': 'NPU 图（用大纲进行键盘导航）',
  'Bench graph (use the outline for keyboard navigation)': '标杆侧图（用大纲进行键盘导航）',
  'Resize panes': '调整窗格大小',
  'Resize the details panel': '调整详情面板大小',
  Fit: '适应',
  'Fit the graph to the pane': '使图适应窗格',
  'Expand all': '全部展开',
  Collapse: '折叠',
  '{side} — build graph': '{side} — 构图',
  nodes: '节点',
  pass: '通过',
  warning: '警告',
  error: '错误',
  'unmatched node': '未匹配节点',
  unmatched: '未匹配',
  'no precision index': '无精度指标',
  'matched, but no statistics to compare (or a build graph)': '已匹配，但没有可比较的统计量（或为构图）',
  'overflow {level}': '溢出 {level}',
  'overflow {level}: {n} NPU nodes, {b} Bench nodes': '溢出 {level}：{n} 个 NPU 节点，{b} 个标杆侧节点',
  '{n} nodes (build graph)': '{n} 个节点（构图）',
  'NPU {n} nodes · Bench {nb} nodes · matched {m} · unmatched {un} NPU / {ub} Bench · errors {e} · warnings {w}':
    'NPU {n} 个节点 · 标杆侧 {nb} 个节点 · 已匹配 {m} · 未匹配 NPU {un} / 标杆侧 {ub} · 错误 {e} · 警告 {w}',
  'task {task}': '任务 {task}',
  // tools
  Tools: '工具',
  'Show or hide the tools': '显示或隐藏工具栏',
  Search: '搜索',
  'Side to search': '搜索哪一侧',
  'Search node names': '搜索节点名称',
  'node name (press /)': '节点名称（按 /）',
  'Regular expression (case-insensitive)': '正则表达式（不区分大小写）',
  'Invalid regular expression: {msg}': '正则表达式无效：{msg}',
  '{pos} of {n}': '第 {pos} / {n} 个',
  '{n} node': '{n} 个节点',
  '{n} nodes': '{n} 个节点',
  Filter: '筛选',
  'Side to filter': '筛选哪一侧',
  '— choose a filter —': '— 选择筛选条件 —',
  'unmatched only': '仅未匹配',
  'matched only': '仅已匹配',
  Diagnosis: '诊断',
  Diagnose: '诊断',
  "Where the two runs part ways: in execution order, the first module whose output differs beyond the pair's float noise while its inputs agree (statistics compared layout-invariantly, relative to the lower precision of the two dtypes). The ranked suspects are listed; the same as probelens diagnose for this step and rank.":
    '两次运行从哪里开始分道扬镳：按执行顺序，第一个输出差异超出该对浮点噪声、而输入一致的模块（统计量按与布局无关的方式比较，以两种数据类型中较低的精度为准）。列出排序后的嫌疑节点，与该步、该卡的 probelens diagnose 结果相同。',
  Heatmap: '热力图',
  "Divergence per layer over every step of the shown rank (and over every rank of the shown step): each step's or rank's folders are read in turn and freed after":
    '按层显示当前卡每一步（以及当前步每张卡）的分歧：逐个读取各步或各卡的文件夹，用后释放',
  "Colour the nodes by their output's divergence (in units of the noise floor) instead of by msprobe's verdict": '按节点输出的分歧（以噪声基线为单位）着色，而不是按 msprobe 的结论着色',
  'Colour by divergence': '按分歧着色',
  'Suspects, best first': '嫌疑节点（按可能性排序）',
  'Divergence per layer': '各层的分歧',
  "log10 of the layer's largest forward divergence in units of the noise floor; the outlined cell holds the top suspect. Click a cell to show that step or rank and the layer's module.":
    '该层正向输出最大分歧（以噪声基线为单位）的 log10；加框的格子含首要嫌疑节点。点击格子显示该步或该卡及该层的模块。',
  'The diagnosis needs a compare result (two sides).': '诊断需要比对结果（两侧）。',
  'The diagnosis needs the dump folders (this result was read from a msprobe output file).': '诊断需要 dump 文件夹（当前结果读自 msprobe 输出文件）。',
  'The core was restarted: reload the folders to diagnose.': '核心已重启：请重新加载文件夹再诊断。',
  '(no Bench counterpart)': '（无标杆对应节点）',
  'The runs agree within their float noise: no measured tensor differs beyond it ({n} tensors measured).': '两次运行在浮点噪声范围内一致：没有被测张量的差异超出噪声（共测 {n} 个张量）。',
  'The runs part ways at step {step}, rank {rank}, in {node} ({pass} pass).': '两次运行在第 {step} 步、第 {rank} 卡的 {node}（{pass}）处分道扬镳。',
  'score {score} · {pass} · step {step} rank {rank}': '得分 {score} · {pass} · 步 {step} 卡 {rank}',
  'within noise': '噪声内',
  'Divergence of the node\'s output in units of the noise floor (a Bench node: its NPU counterpart\'s)': '节点输出的分歧，以噪声基线为单位（标杆节点取其 NPU 对应节点的值）',
  'not measured': '未测量',
  'Diagnosing…': '正在诊断…',
  Diagnosing: '正在诊断',
  'step {k} of {n}': '第 {k} 步，共 {n} 步',
  'rank {k} of {n}': '第 {k} 卡，共 {n} 卡',
  stopped: '已停止',
  'step × layer (rank {rank})': '步 × 层（卡 {rank}）',
  'rank × layer (step {step})': '卡 × 层（步 {step}）',
  agree: '一致',
  diverged: '有分歧',
  'divergence 10^{v} × the noise floor': '分歧为噪声基线的 10^{v} 倍',
  'holds the top suspect': '含首要嫌疑节点',
  forward: '正向',
  backward: '反向',
  'Manual match': '手动匹配',
  'Click a grey node on each side (or Ctrl/⌘-click to pick), then Match (M).': '在两侧各点击一个灰色节点（或 Ctrl/⌘ + 单击选取），然后点击“匹配”（M）。',
  recursive: '递归',
  'Also match corresponding descendants': '同时匹配对应的子孙节点',
  Match: '匹配',
  Unmatch: '取消匹配',
  'Remove the match of the selected node (manual or automatic)': '取消选中节点的匹配（手动或自动）',
  Undo: '撤销',
  Redo: '重做',
  'Undo (Ctrl+Z)': '撤销 (Ctrl+Z)',
  'Redo (Ctrl+Shift+Z)': '重做 (Ctrl+Shift+Z)',
  Save: '保存',
  'Save the manual matches as a .vis.config file': '将手动匹配保存为 .vis.config 文件',
  'Load…': '加载…',
  'Re-apply a .vis.config file (by node names)': '重新应用 .vis.config 文件（按节点名称）',
  'Load a .vis.config file': '加载 .vis.config 文件',
  '{n} manual pair': '{n} 对手动匹配',
  '{n} manual pairs': '{n} 对手动匹配',
  'Matched {n} NPU node(s).': '已匹配 {n} 个 NPU 节点。',
  'Unmatched.': '已取消匹配。',
  'Could not restore exactly: {n} node(s) differ.': '无法完全恢复：{n} 个节点不同。',
  'Undone: {label}.': '已撤销：{label}。',
  'Redone: {label}.': '已重做：{label}。',
  match: '匹配',
  unmatch: '取消匹配',
  load: '加载配置',
  'Saved {n} manual pair(s).': '已保存 {n} 对手动匹配。',
  '{file}: not a JSON file ({msg})': '{file}：不是 JSON 文件（{msg}）',
  '{file}: expected a JSON object {npu node: bench node}': '{file}：应为 JSON 对象 {NPU 节点: 标杆侧节点}',
  '{file}: none of its {n} pair(s) name nodes of this result.': '{file}：其中 {n} 对均不对应本结果中的节点。',
  'Applied {ok} pair(s) from {file}; {bad} not found.': '已应用 {file} 中的 {ok} 对；{bad} 对未找到。',
  Export: '导出',
  'PNG: NPU': 'PNG：NPU',
  'PNG: Bench': 'PNG：标杆侧',
  'SVG: NPU': 'SVG：NPU',
  'SVG: Bench': 'SVG：标杆侧',
  scale: '缩放',
  'Scale of the PNG (device pixels per CSS pixel)': 'PNG 的缩放倍数（每个 CSS 像素对应的设备像素）',
  'PNG scale': 'PNG 缩放',
  'What to export of the graph': '导出图的范围',
  'expanded part': '已展开部分',
  'every node expanded': '全部展开',
  'The whole graph as laid out, not only the visible part of the pane': '按布局导出整张图，而不只是窗格中可见的部分',
  'PNG {w}×{h} px at {s}×': 'PNG {w}×{h} 像素，{s}×',
  "(reduced from {s}× to stay within the browser's canvas limits)": '（为不超出浏览器的画布上限，已从 {s}× 缩小）',
  'SVG of {n} boxes': 'SVG，共 {n} 个框',
  'CSV: selected node': 'CSV：选中节点',
  'CSV: all tensors': 'CSV：全部张量',
  "msprobe's compare table: every compared tensor of this result": 'msprobe 比对表：本结果中所有比对过的张量',
  'Nothing to export.': '没有可导出的内容。',
  'The browser could not encode the image.': '浏览器无法生成图片。',
  'Select a node with tensors first.': '请先选择一个有张量数据的节点。',
  'The compare table needs a compare result (two sides).': '比对表需要比对结果（两侧）。',
  '{n} compared tensors exported.': '已导出 {n} 个比对张量。',
  // details
  'Node details': '节点详情',
  Details: '详情',
  Compare: '比对',
  Stack: '调用栈',
  Diagnostics: '诊断信息',
  'Load a dump folder on each side.': '请在两侧各加载一个 dump 文件夹。',
  'Select a node to see its tensors.': '选择一个节点查看其张量。',
  'Select a node to compare its tensors.': '选择一个节点比对其张量。',
  'Details are unavailable: the core was restarted. Reload the folders.': '详情不可用：核心已重启，请重新加载文件夹。',
  '(no counterpart)': '（无对应节点）',
  'precision index {p}': '精度指标 {p}',
  'This node has no tensor data.': '此节点没有张量数据。',
  Tensor: '张量',
  Side: '侧',
  Copy: '复制',
  Copied: '已复制',
  'Copy failed': '复制失败',
  '(no stack)': '（无调用栈）',
  input: '输入',
  parameters: '参数',
  output: '输出',
  parameters_grad: '参数梯度',
  debug: '调试',
  // mapping panel (mappingpanel.js)
  Mapping: '映射',
  'Layer-mapping editor, match suggestions and mapping export': '层映射编辑器、匹配建议与映射导出',
  'Layer mapping editor': '层映射编辑器',
  'Hide the mapping panel': '隐藏映射面板',
  'Edits are checked as you type; a valid change re-runs the comparison with this mapping (-lm) and re-applies your manual matches.': '输入时即检查；有效的修改会用此映射（-lm）重新比对，并重新应用手动匹配。',
  Template: '模板',
  'Start from a bundled mapping template': '从内置映射模板开始',
  Download: '下载',
  "Download the editor's text as layer_mapping.yaml": '将编辑器内容下载为 layer_mapping.yaml',
  'Layer mapping YAML': '层映射 YAML',
  'Match suggestions': '匹配建议',
  'Bench candidates for grey NPU nodes, best first. Click a row to show both nodes; Accept matches them like a manual match (undo works).': '为灰色 NPU 节点推荐的标杆侧候选，按得分排序。单击一行显示两个节点；“接受”等同手动匹配（可撤销）。',
  'min score': '最低得分',
  'Minimum score for accept all': '全部接受的最低得分',
  'Accept all ≥ score': '接受所有 ≥ 得分',
  'Accept every suggestion of at least this score, round after round until nothing changes': '逐轮接受得分不低于此值的所有建议，直到不再变化',
  Refresh: '刷新',
  'Show more': '显示更多',
  'Export to yaml': '导出为 yaml',
  "Turns your manual matches and accepted suggestions into layer-mapping rules, merged into the editor's yaml.": '将手动匹配和已接受的建议转换为层映射规则，并合并到编辑器中的 yaml。',
  'Export mapping': '导出映射',
  'Syntax error at line {line}, column {column}: {detail}': '语法错误，第 {line} 行第 {column} 列：{detail}',
  'Syntax error: {detail}': '语法错误：{detail}',
  'Valid YAML, but msprobe cannot use it ({why}): the mapping is empty.': 'YAML 有效，但 msprobe 无法使用（{why}）：映射为空。',
  'Empty mapping (bare -lm: the algorithm without rules).': '空映射（不带文件的 -lm：无规则的算法）。',
  'Valid: {keys} keys, {rules} rules (with scoped keys).': '有效：{keys} 个键、{rules} 条规则（含作用域键）。',
  'Valid: {keys} keys, {rules} rules.': '有效：{keys} 个键、{rules} 条规则。',
  'Load two dump folders to apply the mapping.': '加载两侧 dump 文件夹后才能应用映射。',
  'matched NPU nodes': '已匹配 NPU 节点',
  'matched Bench nodes': '已匹配标杆节点',
  'unmatched NPU nodes': '未匹配 NPU 节点',
  'unmatched Bench nodes': '未匹配标杆节点',
  'Re-run in {ms} ms; {k} manual pair(s) re-applied, {a} now matched by the mapping itself, {m} not found.': '重新运行耗时 {ms} ms；重新应用 {k} 对手动匹配，{a} 对已由映射本身匹配，{m} 对未找到。',
  '— load a template —': '— 加载模板 —',
  'Could not read the template: {msg}': '无法读取模板：{msg}',
  'Suggestions need a compare result of two dump folders.': '匹配建议需要两侧 dump 文件夹的比对结果。',
  '{n} suggestion(s) for {k} grey NPU node(s).': '为 {k} 个灰色 NPU 节点给出 {n} 条建议。',
  'Show both nodes': '显示两个节点',
  Accept: '接受',
  'Accepted {npu} → {bench}.': '已接受 {npu} → {bench}。',
  'Could not accept the suggestion (see Manual match).': '无法接受该建议（见“手动匹配”）。',
  'Could not accept the suggestions (see Manual match).': '无法接受这些建议（见“手动匹配”）。',
  'Accepted every suggestion with score ≥ {s}: matched NPU nodes {a} → {b}.': '已接受所有得分 ≥ {s} 的建议：已匹配 NPU 节点 {a} → {b}。',
  'Exporting a mapping needs a compare result of two dump folders.': '导出映射需要两侧 dump 文件夹的比对结果。',
  'No manual matches or accepted suggestions to export.': '没有可导出的手动匹配或已接受的建议。',
  'Exporting {n} pair(s)…': '正在导出 {n} 对…',
  'Merged into the editor; Download saves it as layer_mapping.yaml.': '已合并到编辑器；“下载”将其保存为 layer_mapping.yaml。',
  '{n} rule(s) added': '新增 {n} 条规则',
  '{r} of {n} pair(s) reproduced by the merged mapping': '合并后的映射复现了 {n} 对中的 {r} 对',
  '{m} not reproduced:': '{m} 对未复现：',
  're-apply manual matches': '重新应用手动匹配',
  'accept suggestion': '接受建议',
  'accept suggestions': '接受建议（全部）',
  'Finding match suggestions': '正在查找匹配建议',
  'Fuzzy match (-fm) is on: like msprobe, it ignores the layer mapping.': '模糊匹配（-fm）已开启：与 msprobe 一样，它会忽略层映射。',
  'check the mapping editor now (it also checks 300 ms after typing)': '立即检查映射编辑器（输入停止 300 ms 后也会检查）',
  // layout, template offer, manual-match explanations (store + controllers)
  'Show or fold the folders, the layer mapping and the options': '展开或折叠文件夹、层映射和选项',
  'Resize the tools': '调整工具栏宽度',
  'Resize the outline': '调整大纲宽度',
  'Show or hide the outline (the tree beside the graph)': '显示或隐藏大纲（图旁的树）',
  Outline: '大纲',
  'Show or hide the details (drag the bar above to resize)': '显示或隐藏详情（拖动上方的分隔条调整高度）',
  'Use it': '使用',
  Dismiss: '忽略',
  map: '小地图',
  'Hide the minimap': '隐藏小地图',
  'Show the minimap': '显示小地图',
  demo: '示例',
  'the bundled demo': '内置示例',
  'NPU looks like {npu}, Bench like {bench}: the bundled {template} fits this pair': 'NPU 侧像 {npu}，标杆侧像 {bench}：内置模板 {template} 适用于这一对',
  'now {now} NPU nodes matched; counting what it would match…': '当前匹配 {now} 个 NPU 节点；正在计算使用它后的匹配数…',
  'now {now} NPU nodes matched': '当前匹配 {now} 个 NPU 节点',
  'it would match {gain} NPU nodes instead of {now}.': '使用它将匹配 {gain} 个 NPU 节点（当前 {now} 个）。',
  'Manual matching needs a compare result (two sides).': '手动匹配需要比对结果（两侧）。',
  'Pick a node on each side: click it (Ctrl/⌘-click picks without selecting).': '在两侧各选取一个节点：单击（Ctrl/⌘ + 单击只选取不选中）。',
  'These two nodes are already matched.': '这两个节点已经匹配。',
  'Cannot match a {a} with a {b}: msprobe matches only nodes of the same type.': '不能将 {a} 与 {b} 匹配：msprobe 只匹配同类型的节点。',
  module: '模块',
  API: 'API',
  'API collection': 'API 集合',
  'Match will pair {a} ⇄ {b}.': '匹配将配对 {a} ⇄ {b}。',
  manual: '手动',
  automatic: '自动',
  'It replaces the {kind} match {a} ⇄ {b}.': '它将取代{kind}匹配 {a} ⇄ {b}。',
  'Its {dir} twin {a} ⇄ {b} is matched too.': '其{dir}对应节点 {a} ⇄ {b} 也会匹配。',
  'Recursive: {k} of {n} descendants have a Bench node of the same name below it.': '递归：{n} 个后代中有 {k} 个在标杆侧有同名节点。',
  'Replaced: {a} ⇄ {b}.': '已取代：{a} ⇄ {b}。',
  'Twin matched too: {a} ⇄ {b}.': '对应的正向/反向节点也已匹配：{a} ⇄ {b}。',
  'Recursive: {k} of {n} descendants matched; {m} have no Bench node of the same name below {b} (e.g. {x}: no {w}).': '递归：{n} 个后代中匹配了 {k} 个；{m} 个在 {b} 下没有同名的标杆节点（例如 {x}：没有 {w}）。',
  'Re-applied {n} manual pair(s) by name.': '已按名称重新应用 {n} 对手动匹配。',
  'Re-applied {n} manual pair(s) by name; {m} name nodes not in this result.': '已按名称重新应用 {n} 对手动匹配；{m} 对的节点不在此结果中。',
  'Manual matching works on compared dump folders: this .vis.db / .vis holds only the result, not the dumps its statistics came from. Load the two dump folders to match by hand.': '手动匹配需要比对的 dump 文件夹：此 .vis.db / .vis 只包含结果，不包含其统计量来源的 dump。请加载两侧 dump 文件夹后再手动匹配。',
  'The core was restarted: reload the folders to match by hand.': '核心已重启：请重新加载文件夹后再手动匹配。',
  '{action} discards your {n} manual match(es). Save them first with Manual match → Save (.vis.config). Discard them?': '{action}会丢弃您的 {n} 个手动匹配。可先用“手动匹配 → 保存”（.vis.config）保存。确定丢弃吗？',
  'Choosing another folder': '选择其他文件夹',
  'Opening a .vis.db': '打开 .vis.db',
  'Could not accept the suggestion: {why}': '无法接受该建议：{why}',
  'Unmatched, with its twin {a} ⇄ {b}.': '已取消匹配，连同其对应节点 {a} ⇄ {b}。',
  'Save .vis.db': '保存 .vis.db',
  'notes on the inputs: open them': '输入有提示：展开查看',
  'Download the opened .vis.db with the manual matches made on it (rows marked modified)': '下载包含手动匹配结果的 .vis.db（修改的行已标记）',
  'Saved {file} with {n} manual pair(s).': '已保存 {file}，含 {n} 对手动匹配。',
  'Could not accept the suggestions: {why}': '无法接受这些建议：{why}',
};

/**
 * msprobe's own Chinese texts carried by a result (the legend's descriptions, `tb_config.node_colors`;
 * the metric tool tips, `tb_config.tool_tip`) → English. The stored texts never change; the English
 * UI shows these, the Chinese UI msprobe's text.
 * @type {Record<string, string>}
 */
export const MSPROBE_EN = {
  '此节点所有输入输出的统计量误差, 颜色越深代表调试侧与标杆侧的偏差越大':
    'Error of the statistics of all inputs and outputs of this node; the darker the colour, the larger the deviation between the debug side and the bench side',
  '此节点所有输入输出的 tensor 误差, 颜色越深代表调试侧与标杆侧的偏差越大':
    'Tensor error of all inputs and outputs of this node; the darker the colour, the larger the deviation between the debug side and the bench side',
  '与标杆相比, 此节点任意输入输出的md5值不同': 'Compared with the bench, the md5 of some input or output of this node differs',
  '与标杆相比, 此节点所有输入输出的md5值相同': 'Compared with the bench, the md5 of every input and output of this node is the same',
  '比对过程中节点未匹配上': 'The node was not matched in the comparison',
  '对比过程中节点未匹配上': 'The node was not matched in the comparison',
  '此节点所有输入输出的统计量相对误差, 值越大代表测量值与标杆值的偏差越大, 相对误差计算方式:|(测量值-标杆值)/标杆值|':
    'Relative error of the statistics of all inputs and outputs of this node; the larger the value, the larger the deviation from the bench; relative error = |(measured − bench) / bench|',
  '此节点所有输入输出的统计量相对误差，值越大代表测量值与标杆值的偏差越大，相对误差计算方式：|(测量值-标杆值)/标杆值|':
    'Relative error of the statistics of all inputs and outputs of this node; the larger the value, the larger the deviation from the bench; relative error = |(measured − bench) / bench|',
  'NPU与标杆API统计信息比对，最大值的差值': 'NPU vs bench statistics: difference of the maximums',
  'NPU与标杆API统计信息比对，最小值的差值': 'NPU vs bench statistics: difference of the minimums',
  'NPU与标杆API统计信息比对，平均值的差值': 'NPU vs bench statistics: difference of the means',
  'NPU与标杆API统计信息比对，2范数（平方根）的差值': 'NPU vs bench statistics: difference of the L2 norms (square root)',
  '数据MD5信息，用于比较两个数据信息是否完全一致': 'MD5 of the data, to tell whether the two are exactly the same',
  'Tensor中的元素逐个与对应的标杆数据对比，相对误差小于千分之一的比例占总元素个数的比例，比例越接近1越好':
    'Share of the tensor\'s elements whose relative error against the bench is below one thousandth; the closer to 1 the better',
  'Tensor中的元素逐个与对应的标杆数据对比，相对误差小于千分之五的比例占总元素个数的比例，比例越接近1越好':
    'Share of the tensor\'s elements whose relative error against the bench is below five thousandths; the closer to 1 the better',
  '通过计算两个向量的余弦值来判断其相似度，数值越接近于1说明计算出的两个张量越相似，实际可接受阈值为大于0.99。在计算中可能会存在nan，主要由于可能会出现其中一个向量为0':
    'Cosine similarity of the two tensors: the closer to 1, the more alike; acceptable above 0.99. It can be nan, mostly when one of them is all zeros',
  '当最大绝对误差越接近0表示其计算的误差越小，实际可接受阈值为小于0.001':
    'The closer the maximum absolute error is to 0, the smaller the error; acceptable below 0.001',
  '当最大相对误差越接近0表示其计算的误差越小。当dump数据中存在0或Nan时，比对结果中最大相对误差则出现inf或Nan的情况，属于正常现象':
    'The closer the maximum relative error is to 0, the smaller the error. With zeros or NaN in the dump it is inf or NaN, which is normal',
};

/** Texts of msprobe that start with a known sentence and go on with another text (legacy real-data legend). */
const MSPROBE_EN_PREFIX = /** @type {[string, string][]} */ ([
  [
    '此节点所有输入的最小双千分之一和所有输出的最小双千分之一的差值的绝对值',
    'Absolute difference between the smallest one-thousandth error ratio of all inputs and that of all outputs of this node (how the metric changes); the larger the value, the larger the deviation from the bench',
  ],
]);

/**
 * A text of msprobe (Chinese) in the current language: English in the English UI when known, else as
 * msprobe wrote it; the probelens texts (English keys) are translated as by t().
 * @param {string} text
 */
export function msprobeText(text) {
  if (current === 'zh') return ZH[text] ?? text;
  const en = MSPROBE_EN[text];
  if (en) return en;
  for (const [zh, e] of MSPROBE_EN_PREFIX) if (text.startsWith(zh)) return e;
  return text;
}

/**
 * The language to start with: the remembered choice, else the browser's.
 * @returns {Lang}
 */
export function detectLang() {
  try {
    const saved = localStorage.getItem(LANG_KEY);
    if (saved === 'en' || saved === 'zh') return saved;
  } catch {
    // storage unavailable (privacy mode): fall back to the browser language
  }
  return (navigator.language || '').toLowerCase().startsWith('zh') ? 'zh' : 'en';
}

/** @param {Lang} lang @param {boolean} remember */
export function setLang(lang, remember) {
  current = lang;
  document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
  if (!remember) return;
  try {
    localStorage.setItem(LANG_KEY, lang);
  } catch {
    // not remembered; the choice still applies to this page
  }
}

/** @returns {Lang} */
export function getLang() {
  return current;
}

/**
 * Translates an English text; `{name}` placeholders are filled from params.
 * @param {string} key
 * @param {Record<string, string | number>} [params]
 */
export function t(key, params) {
  let s = current === 'zh' ? ZH[key] ?? key : key;
  if (params) s = s.replace(/\{(\w+)\}/g, (m, k) => (k in params ? String(params[k]) : m));
  return s;
}

/** @param {string | null} s */
const norm = (s) => (s ?? '').replace(/\s+/g, ' ').trim();

/**
 * (Re)translates the marked elements under root.
 * @param {ParentNode} root
 */
export function translateDom(root) {
  for (const el of Array.from(root.querySelectorAll('[data-i18n]'))) {
    const e = /** @type {HTMLElement} */ (el);
    if (e.dataset.i18nKey === undefined) e.dataset.i18nKey = norm(e.textContent);
    e.textContent = t(e.dataset.i18nKey);
  }
  for (const [attr, data] of /** @type {[string, string][]} */ ([
    ['title', 'i18nTitle'],
    ['aria-label', 'i18nAria'],
    ['placeholder', 'i18nPlaceholder'],
  ])) {
    const sel = `[data-${data.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}]`;
    for (const el of Array.from(root.querySelectorAll(sel))) {
      const e = /** @type {HTMLElement} */ (el);
      const keyProp = `${data}Key`;
      if (e.dataset[keyProp] === undefined) e.dataset[keyProp] = norm(e.getAttribute(attr));
      const key = e.dataset[keyProp] ?? '';
      if (key) e.setAttribute(attr, t(key));
    }
  }
}
