// Writes a synthetic msprobe statistics dump (construct.json, dump.json, stack.json) with about
// `modules * (apisPerModule + 1)` nodes, for the large-graph test. Deterministic.
import fs from 'node:fs';
import path from 'node:path';

/**
 * @param {string} dir output folder (created)
 * @param {{modules: number, apisPerModule: number, scale?: number}} o scale perturbs the stats (bench side)
 */
export function writeSyntheticDump(dir, { modules, apisPerModule, scale = 1 }) {
  fs.mkdirSync(dir, { recursive: true });
  const construct = {};
  const stack = { 0: [[], ['File /home/user/train/synthetic.py, line 1, in <module>, \n main()']] };
  const parts = [];
  let api = 0;
  const stat = (v) => ({ type: 'torch.Tensor', dtype: 'torch.float32', shape: [4, 8], Max: v, Min: -v, Mean: v / 10, Norm: v * 3, requires_grad: false });
  for (let m = 0; m < modules; m++) {
    const mod = `Module.blocks.${m}.Block.forward.0`;
    construct[mod] = null;
    parts.push(`${JSON.stringify(mod)}: ${JSON.stringify({ input_args: [stat(1 + (m % 7))], input_kwargs: {}, output: [stat((1 + (m % 7)) * scale)] })}`);
    for (let k = 0; k < apisPerModule; k++) {
      const name = `Torch.add.${api++}.forward`;
      construct[name] = mod;
      const v = 1 + ((m + k) % 13);
      parts.push(`${JSON.stringify(name)}: ${JSON.stringify({ input_args: [stat(v), stat(v / 2)], input_kwargs: {}, output: [stat(v * (k % 5 === 0 ? scale : 1))] })}`);
    }
  }
  fs.writeFileSync(path.join(dir, 'construct.json'), JSON.stringify(construct));
  fs.writeFileSync(path.join(dir, 'stack.json'), JSON.stringify(stack));
  fs.writeFileSync(
    path.join(dir, 'dump.json'),
    `{"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": null, "data": {${parts.join(',\n')}}}`,
  );
  return modules * (apisPerModule + 1);
}
